"""The generation defaults, written once: the page, the API, the command line, the engine's
configs, the sweeps and the models of the analytic layer import them from here. Standard
library only (the analytic layer may import it)."""

K = 4  # draft tokens per cycle
TEMPERATURE = 0.8
TOP_P = 1.0  # 1 = off
TOP_K = 0  # 0 = off
MAX_NEW_TOKENS = 64
SEED = 0
