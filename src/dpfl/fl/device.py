"""Which torch device a job computes on: `device: auto | cpu | cuda` in config/config.yaml."""

from __future__ import annotations


class DeviceError(RuntimeError):
    """The requested device is not available on this machine."""


def resolve_device(name: str = "auto"):
    """auto: CUDA when a GPU is visible, else the CPU; cuda without a GPU is an error (not a silent CPU run)."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("config/config.yaml (or --config) device: cuda was requested but torch sees no CUDA GPU on "
                          "this machine; allowed: auto, cpu, cuda (cuda only with a GPU): use device: auto or cpu")
    if name not in ("cpu", "cuda"):
        raise DeviceError(f"config/config.yaml (or --config) device: unknown device {name!r}; allowed: auto, cpu, cuda")
    return torch.device(name)


def describe(device) -> str:
    """A readable name of the device for sidecars and logs."""
    import torch

    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return "cpu"
