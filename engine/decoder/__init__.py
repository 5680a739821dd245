"""The decoder: model loading, the forward pass over a KV cache, sampling, verification,
the parts both decoding loops share (common), the speculative and target-only loops, their
events and statistics."""
