"""The decoder: model loading, the forward pass over a KV cache, sampling, verification,
the speculative and target-only loops, their events and statistics."""
