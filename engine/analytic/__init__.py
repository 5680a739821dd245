"""Pure models of speculative decoding: formulas only, nothing heavier than the standard library."""
