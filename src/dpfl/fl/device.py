"""Which torch device a job computes on: `device: auto | cpu | cuda` in config/config.yaml; and whether its process
keeps the memory it frees (`keep_freed_memory`)."""

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


def keep_freed_memory() -> bool:
    """Let this process keep the memory it frees (glibc's malloc: no mmap for blocks under 1 GiB, no trimming of the
    heap), so that a fresh tensor reuses pages instead of faulting new ones in: kato2024's user-level rounds
    allocate multi-MB activations every step, and first-touch page faults took ≈ 20% of their time. The peak
    memory is unchanged (the process already reached it); values are unchanged. False where it does not apply
    (not glibc)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    mmap_ok = mallopt(m_mmap_threshold, 1 << 30) or mallopt(m_mmap_threshold, 32 << 20)  # older glibc caps it
    return bool(mmap_ok) and bool(mallopt(m_trim_threshold, 2**31 - 1))
