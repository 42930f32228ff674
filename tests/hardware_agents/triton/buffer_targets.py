"""Sandbox targets for test_triton_judge_buffers.py: a child that maps the judge's region as the
harness does (`judge_buffers.open_buffers`) and does what the test asks of it. Imported in the
sandboxed child (its folder is on the child's PYTHONPATH)."""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from pathlib import Path

import msgspec
import torch

from hardware_agents.triton.judge_buffers import open_buffers
from hardware_agents.triton.records import BufferHandle


class Ask(msgspec.Struct, frozen=True):
    handle: BufferHandle
    what: str  # "write", "tamper" or "thread"


class Told(msgspec.Struct):
    saw_inputs: list[float]
    resize: str  # what ftruncate of the region's fd answered


def run(payload: bytes, workdir: Path) -> Told:
    ask = msgspec.msgpack.decode(payload, type=Ask)
    bufs = open_buffers(ask.handle)
    x, out = bufs.view("x"), bufs.view("out")
    told = Told(saw_inputs=x.tolist(), resize="allowed")
    try:  # a shrunk region would make the judge's reads fault: sealed against it
        os.ftruncate(ask.handle.fd, 0)
    except OSError as e:
        told.resize = errno.errorcode.get(e.errno or 0, str(e.errno))
    out.copy_(x * 2)
    if ask.what == "tamper":  # an input changed, a byte past the output's end
        x[0] += 1
        end = out.reshape(-1)
        torch.tensor([], dtype=out.dtype).set_(
            end.untyped_storage(), end.storage_offset() + end.numel(), (1,)
        )[0] = 0
    if ask.what == "thread":  # writes the output without end, from another thread

        def scribble() -> None:
            k = 0.0
            while True:
                k += 1.0
                out.fill_(k)

        threading.Thread(target=scribble, daemon=True).start()
        time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGSTOP)  # the judge reads while we are stopped
    out.fill_(-7.0)  # continued: a write after the judge's read
    return told
