"""NVIDIA GPUs of this host and the pool that hands one to each profile.

Discovery never initialises CUDA in the agent's process: `nvidia-smi` when it is on the
PATH, else a short-lived `python -c` child that asks torch. Each profile runs in its own
sandboxed child pinned to one GPU (`CUDA_VISIBLE_DEVICES`); the pool gives a GPU to at
most one profile at a time in this process, and a file lock per GPU keeps other agent
processes on the same host from timing on it concurrently.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec


class GpuInfo(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    name: str
    memory_bytes: int = 0


def _from_nvidia_smi() -> list[GpuInfo] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            mem = (
                int(float(parts[2]) * (1 << 20))
                if len(parts) > 2 and parts[2].replace(".", "").isdigit()
                else 0
            )
            gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_bytes=mem))
    return gpus


_TORCH_PROBE = (
    "import json, torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "print(json.dumps([[i, torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory]"
    " for i in range(n)]))\n"
)


def _from_torch_child() -> list[GpuInfo]:
    if not glob.glob("/dev/nvidia[0-9]*"):
        return []  # no device nodes: no need to spend seconds importing torch
    try:
        out = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        return [
            GpuInfo(index=i, name=n, memory_bytes=m) for i, n, m in json.loads(out.strip().splitlines()[-1])
        ]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []


@functools.cache
def discover() -> tuple[GpuInfo, ...]:
    """The CUDA GPUs of this host (cached for the process)."""
    found = _from_nvidia_smi()
    if found is None:
        found = _from_torch_child()
    return tuple(found)


def device_nodes() -> list[str]:
    """Character devices a CUDA process opens (read/write + ioctl) inside the sandbox."""
    nodes = glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*") + glob.glob("/dev/dri/*")
    return sorted(set(nodes))


class GpuPool:
    """Hands out GPU indices, one profile per GPU at a time (threads and processes)."""

    def __init__(self, indices: Sequence[int], lock_dir: Path) -> None:
        if not indices:
            raise ValueError("a GPU pool needs at least one GPU")
        self._free = list(indices)
        self._cond = threading.Condition()
        self._lock_dir = lock_dir

    @contextmanager
    def acquire(self) -> Iterator[int]:
        with self._cond:
            while not self._free:
                self._cond.wait()
            idx = self._free.pop(0)
        try:
            self._lock_dir.mkdir(parents=True, exist_ok=True)
            with open(self._lock_dir / f"gpu{idx}.lock", "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    yield idx
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
        finally:
            with self._cond:
                self._free.append(idx)
                self._cond.notify()
