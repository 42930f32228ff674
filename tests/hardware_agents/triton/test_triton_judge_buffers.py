"""The judge's region (`judge_buffers.py`, CPU implementation): a real sandboxed child maps it
as the harness does, sees what the judge wrote, cannot resize it, and what it writes is
read by the judge through its own mapping; the judge's checks of guards and inputs use the
poison and pristine copies it holds, never anything read back from the region; a thread
that writes without end is stopped with its child, so the judge's reads at a stop agree."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
import torch
from buffer_targets import Ask, Told

from hardware_agents.sandbox import Sandbox, SandboxPolicy
from hardware_agents.triton.judge_buffers import GUARD_BYTES, SharedMemoryBuffers, layout

HERE = str(Path(__file__).resolve().parent)


def _region() -> tuple[SharedMemoryBuffers, torch.Tensor]:
    slots, size = layout([("x", "float32", [64], True), ("out", "float32", [64], True)])
    bufs = SharedMemoryBuffers(slots, size)
    x = torch.arange(64, dtype=torch.float32)
    bufs.write("x", x)
    bufs.poison("out")
    return bufs, x


def _spawn(box: Sandbox, bufs: SharedMemoryBuffers, what: str):  # type: ignore[no-untyped-def]
    return box.spawn(
        "buffer_targets:run",
        msgspec.msgpack.encode(Ask(handle=bufs.handle, what=what)),
        pass_fds=bufs.pass_fds,
    )


def test_the_child_maps_the_judges_region_and_cannot_resize_it() -> None:
    bufs, x = _region()
    assert bool(torch.isnan(bufs.view("out")).all()) and bufs.guards_intact("out")
    with Sandbox(SandboxPolicy(wall_timeout_s=60, python_path=(HERE,))) as box:
        child = _spawn(box, bufs, "write")
        try:
            assert child.wait_stopped()
            assert torch.equal(bufs.view("out"), x * 2)  # its writes, read through our mapping
            assert bufs.unchanged("x", x) and bufs.guards_intact("out")
            child.resume()
            assert not child.wait_stopped()  # it ran to its end
        finally:
            out = child.finish()
    assert out.status == "ok", out.log
    told = out.decode(Told)
    assert told.saw_inputs == x.tolist()
    assert told.resize == "EPERM"  # sealed: the judge's reads never fault
    assert bool((bufs.view("out") == -7.0).all())  # it wrote again once continued: read at the stop


def test_guards_and_inputs_are_checked_against_the_judges_own_copies() -> None:
    bufs, x = _region()
    with Sandbox(SandboxPolicy(wall_timeout_s=60, python_path=(HERE,))) as box:
        child = _spawn(box, bufs, "tamper")
        try:
            assert child.wait_stopped()
            assert not bufs.unchanged("x", x)  # its input changed
            assert not bufs.guards_intact("out")  # a byte written past its output's end
            assert bufs.guards_intact("x") and torch.equal(bufs.view("out"), x * 2)
        finally:
            child.finish()
    lo, hi = bufs.guards("out")
    assert lo.numel() == hi.numel() == GUARD_BYTES


def test_a_writing_thread_is_stopped_with_its_child() -> None:
    """While the child runs, its thread changes the output between two reads of the judge's;
    held stopped, it does not (and the freeze proves nothing of the child ran)."""
    bufs, _ = _region()
    with Sandbox(SandboxPolicy(wall_timeout_s=60, python_path=(HERE,))) as box:
        child = _spawn(box, bufs, "thread")
        try:
            deadline = time.monotonic() + 30
            while float(bufs.view("out")[0]) < 2 and time.monotonic() < deadline:  # the thread is writing
                time.sleep(0.01)
            first = bufs.view("out").clone()
            time.sleep(0.05)
            assert not torch.equal(first, bufs.view("out"))  # running: the reads disagree
            assert child.wait_stopped()
            first = bufs.view("out").clone()
            time.sleep(0.2)
            assert torch.equal(first, bufs.view("out"))  # stopped: they agree
            assert child.check_frozen() is None
        finally:
            out = child.finish()
    assert out.freeze_breach is None


@pytest.mark.parametrize("dtype", ["bfloat16", "int32", "bool"])
def test_poison_and_pristine_guards_per_dtype(dtype: str) -> None:
    slots, size = layout([("o", dtype, [3, 5], True)])
    bufs = SharedMemoryBuffers(slots, size)
    bufs.poison("o")
    assert bufs.guards_intact("o")
    lo, _ = bufs.guards("o")
    lo[7] ^= 1
    assert not bufs.guards_intact("o")
