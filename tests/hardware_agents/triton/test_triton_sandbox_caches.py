"""The Triton sandbox as root: what the libraries create before the privilege drop (Triton's
cache under HOME = the work dir, CUDA's ~/.nv on a GPU) must stay writable by the sandbox
uid. On a GPU host run as root every kernel compile failed with "Permission denied" in
Triton's cache; the same warm-up runs here (no GPU needed), followed by a cache write as
the dropped uid."""

from __future__ import annotations

import os

import pytest

from hardware_agents.sandbox import Sandbox, SandboxPolicy
from hardware_agents.triton.warmup import CacheProbe


@pytest.mark.skipif(os.getuid() != 0, reason="the privilege drop happens only when the agent runs as root")
def test_triton_cache_created_before_the_drop_is_writable_after_it() -> None:
    policy = SandboxPolicy(
        wall_timeout_s=120,
        preload=("torch", "triton", "hardware_agents.triton.warmup"),
        address_space_bytes=16 << 30,
    )
    with Sandbox(policy) as box:
        out = box.run("hardware_agents.triton.warmup:cache_write_probe")
        assert out.status == "ok", f"{out.status}: {out.error}\n{out.log}"
        probe = out.decode(CacheProbe)
        assert probe.uid != 0 and probe.uid == box.uid
        warm = box.workdir / ".triton" / "cache"
        entries = {p.name for p in warm.rglob("*.txt")}
        assert {"warmup.txt", "probe.txt", "later.txt"} <= entries, entries
        # the warm-up entry was created by root before the drop, then handed to the sandbox uid
        assert next(warm.rglob("warmup.txt")).stat().st_uid == box.uid
