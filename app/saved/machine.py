"""The machine a run was measured on, as its saved record describes it."""

from __future__ import annotations

import os
import platform
from functools import cache
from typing import Any

from engine.decoder.loading import ModelPair


@cache
def _processor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine(pair: ModelPair) -> dict[str, Any]:
    import torch

    device = pair.device
    return {
        "device": str(device),
        "accelerator": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "processor": _processor(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "dtype": str(pair.dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "platform": platform.platform(terse=True),
    }
