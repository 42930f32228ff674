"""Sandboxed children started ahead of need: the slow part of a child's life is done before
there is anything to profile.

A Triton child spends seconds before its first useful instruction: the interpreter starts,
torch and Triton import, CUDA makes a context and Triton's driver builds its utilities
(5-6 s on an H200 host, most of a profile's wall time once the problem's data is built). A
spare does all of that, drops its privileges, locks itself down and stops (SIGSTOP), holding
no kernel and no data: `serve` is its sandbox target. When a profile (or a reference run)
needs a child, the agent takes the spare, re-caps its work dir for the work, stages the
solution's files there and the request (`ServeRequest`: the target and its payload) while the
child is still stopped, starts the child's wall-clock allowance and continues it: the child
reads the request and runs the target as a fresh child would. One spare serves one request;
the agent starts the next one as soon as it has taken this one, so that it warms up while
this one works (a spare holds no kernel, and on a GPU only makes its CUDA context).

What a spare may read is fixed when it starts: the agent's whole data root (every problem's
input files; references are never on disk) and its timing-rounds root (0711: a round's
folder and files have unguessable names), instead of one problem's folders. Nothing else of
the child's isolation differs from a fresh child's, and nothing of the kernel exists in the
process before the request is read.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import msgspec

REQUEST_FILE = ".sandbox/request.msgpack"  # in the child's work dir, written while it is stopped
TARGETS = {
    "harness": "hardware_agents.triton.harness:run",
    "reference": "hardware_agents.triton.reference:run_reference",
}


class ServeRequest(msgspec.Struct, frozen=True, kw_only=True):
    target: str  # a key of TARGETS
    payload: bytes


def serve(payload: bytes, workdir: Path) -> object:
    """Sandbox target of a spare: stop until the agent has a request, then run it."""
    from hardware_agents.triton.harness import stop_for_parent

    stop_for_parent()  # ready: everything is loaded; the agent continues us with a request
    req = msgspec.msgpack.decode((workdir / REQUEST_FILE).read_bytes(), type=ServeRequest)
    module, _, attr = TARGETS[req.target].partition(":")
    return getattr(importlib.import_module(module), attr)(req.payload, workdir)
