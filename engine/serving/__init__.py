"""Talking to vLLM, the serving engine: starting a server, its HTTP client, its
speculative-decoding counters (``/metrics``), the calibration, probe and batch sweep read
from them, and their commands. Apart from :mod:`engine.measure`, which measures our engine;
vLLM runs in its own virtualenv and is never imported."""
