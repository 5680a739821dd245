"""Measurement on top of the decoder: benchmarks and the figures they report."""
