"""Preloaded into Triton sandbox children, before the privilege drop and Landlock: what the
libraries would otherwise do lazily, and fail to do once the process is locked down.

- Triton's file cache is opened (`~/.triton/cache`, under the work dir, which is HOME),
  as Triton's driver does when it builds its launcher utilities; these files are created
  by root, and the sandbox hands the work dir's tree to the sandbox uid before it drops
  privileges, so the kernel's later compiles (as that uid) can write beside them.
- With a GPU (`CUDA_VISIBLE_DEVICES` set and CUDA available): CUDA is initialised and
  Triton's CUDA driver loaded (libraries read, launcher utilities built and cached).

`cache_write_probe` is a sandbox target that writes a Triton cache entry as the sandboxed
uid: the failure seen on GPU hosts run as root (Permission denied in Triton's cache) shows
up here on any host.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec
from triton.runtime.cache import get_cache_manager

from hardware_agents.sandbox import in_sandbox_child


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()  # Triton's cache keys are hex digests


WARMUP_KEY = _key("accelopt-sandbox-warmup")


def warm_triton_cache() -> None:
    """Open Triton's file cache and store one entry (as its driver does at start-up)."""
    cache = get_cache_manager(WARMUP_KEY)
    if cache.get_file("warmup.txt") is None:
        cache.put(b"created before the privilege drop\n", "warmup.txt", binary=True)


def warm_cuda() -> None:
    if os.environ.get("CUDA_VISIBLE_DEVICES") in (None, ""):
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.empty(1, device="cuda")
        import triton.runtime.driver

        triton.runtime.driver.active.get_current_device()


class CacheProbe(msgspec.Struct, kw_only=True):
    uid: int
    written: str


def cache_write_probe(payload: bytes, workdir: Path) -> CacheProbe:
    """Write a fresh Triton cache entry (as a kernel compile does) after the lockdown."""
    cache = get_cache_manager(_key(f"accelopt-probe-{os.getpid()}"))
    path = cache.put(b"written by the sandboxed uid\n", "probe.txt", binary=True)
    warm = get_cache_manager(WARMUP_KEY)
    warm.put(b"beside the warm-up entry\n", "later.txt", binary=True)  # in a dir root created
    return CacheProbe(uid=os.getuid(), written=str(path))


if in_sandbox_child():  # preloaded there; imported elsewhere (tests, the agent) it does nothing
    warm_triton_cache()
    warm_cuda()
