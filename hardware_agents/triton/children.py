"""The Triton agent's sandboxed children: a box with a profile's files staged, a child run to
its end (the reference, an untimed harness), the GPU a child holds, and the children started
ahead of need (a spare per GPU, or the interpreter's; `spare.py` is their side: a spare loads
torch and Triton, locks itself down and waits stopped until it is given a request).

    children = Children(pool, sandbox_dir=..., spares=True, longest_s=600.0, spare_policy=...)
    out, box = children.run(REFERENCE_TARGET, request, policy)     # to its end, on a spare if ready
    with children.gpu() as idx: ...                                 # a GPU of the pool (None: none)
    children.claim_spare(idx, "harness", request, policy, stage)   # (box, child) continued into it, or None
    children.box(policy, stage); children.start_spare(idx); children.close()
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import msgspec

from hardware_agents.sandbox import Sandbox, SandboxChild, SandboxOutcome, SandboxPolicy, detached
from hardware_agents.triton.gpu import GpuPool
from hardware_agents.triton.spare import REQUEST_FILE, ServeRequest

HARNESS_TARGET = "hardware_agents.triton.harness:run"
REFERENCE_TARGET = "hardware_agents.triton.reference:run_reference"
SERVE_TARGET = "hardware_agents.triton.spare:serve"
SERVED = {HARNESS_TARGET: "harness", REFERENCE_TARGET: "reference"}  # spare.TARGETS, by target
SPARE_FILE_BYTES = 32 << 30  # the largest file a spare may write (its work dir is re-capped per request)
SPARE_START_S = 600.0  # how long a spare may take to be ready
Stage = dict[str, str | bytes]  # files staged in a child's work dir: relative path -> content


def stage_files(box: Sandbox, stage: Stage | None) -> None:
    """`stage`'s files written into the box's work dir and given to its child."""
    for rel, content in (stage or {}).items():
        p = box.workdir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        box.give(rel)


class Children:
    """The agent's children: `pool` the GPUs they hold (None: the interpreter's, no GPU);
    with `spares`, one child per GPU started ahead of need under `spare_policy()` (a spare
    serves a request that needs at most `longest_s` of wall time)."""

    def __init__(
        self,
        pool: GpuPool | None,
        *,
        sandbox_dir: Path | None,
        spares: bool,
        longest_s: float,
        spare_policy: Callable[[], SandboxPolicy],
    ) -> None:
        self.pool, self.sandbox_dir = pool, sandbox_dir
        self.spares, self.longest_s = spares, longest_s
        self._spare_policy = spare_policy
        self._spares: dict[int | None, tuple[Sandbox, SandboxChild]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def gpu(self) -> AbstractContextManager[int | None]:
        """A GPU of the pool, held until the context ends (None: the interpreter's turn)."""
        return self.pool.acquire() if self.pool is not None else contextlib.nullcontext(None)

    def box(self, policy: SandboxPolicy, stage: Stage | None) -> Sandbox:
        """A fresh sandbox with `stage`'s files in its work dir."""
        box = Sandbox(policy, base_dir=self.sandbox_dir)
        try:
            stage_files(box, stage)
        except BaseException:
            box.close()
            raise
        return box

    def run(
        self,
        target: str,
        request: msgspec.Struct,
        policy: SandboxPolicy,
        stage: Stage | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> tuple[SandboxOutcome, Sandbox]:
        """A child that runs to its end (the reference, an untimed harness); `pass_fds` it
        inherits (the judge's region: never a spare then, which started before them)."""
        with self.gpu() as idx:
            claimed = None if pass_fds else self.claim_spare(idx, SERVED[target], request, policy, stage)
            self.start_spare(idx)  # the next child warms up while this one works
            if claimed is not None:
                box, child = claimed
                try:
                    if child.wait_stopped():  # a stop the protocol does not have: not our harness
                        child.kill()
                    return child.finish(), box
                except BaseException:
                    box.close()
                    raise
            box = self.box(policy, stage)
            try:
                env = {"CUDA_VISIBLE_DEVICES": str(idx)} if idx is not None else None
                if pass_fds:  # Sandbox.run passes none: a spawned child, run to its end
                    child = box.spawn(target, request, extra_env=env, pass_fds=pass_fds)
                    if child.wait_stopped():  # a stop the protocol does not have: not our harness
                        child.kill()
                    return child.finish(), box
                return box.run(target, request, extra_env=env), box
            except BaseException:
                box.close()
                raise

    # --- spares (`spare.py`): children started ahead of need --------------------------------------

    def start_spare(self, gpu: int | None) -> None:
        """A spare for `gpu` (None: the interpreter's), unless one waits already."""
        if not self.spares or self._closed:
            return
        with self._lock:
            if gpu in self._spares:
                return
            box = Sandbox(self._spare_policy(), base_dir=self.sandbox_dir)
            try:
                env = {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else None
                with detached():  # for the next profile: not the current one's to cancel
                    child = box.spawn(SERVE_TARGET, b"", timeout_s=SPARE_START_S, extra_env=env)
            except BaseException:
                box.close()
                raise
            self._spares[gpu] = (box, child)

    def claim_spare(
        self,
        gpu: int | None,
        target: str,
        request: msgspec.Struct,
        policy: SandboxPolicy,
        stage: Stage | None,
    ) -> tuple[Sandbox, SandboxChild] | None:
        """The spare of `gpu`, given `request` for `target` and continued into it (None: there
        is none, it died, or the request needs more time than it was started with)."""
        if policy.wall_timeout_s > self.longest_s:
            return None
        with self._lock:
            got = self._spares.pop(gpu, None)
        if got is None:
            return None
        box, child = got
        try:
            if not (child.held or child.wait_stopped()):  # died while warming up: a fresh child instead
                child.finish()
                box.close()
                return None
            box.resize_workdir(policy.workdir_bytes)
            stage_files(box, stage)
            req = ServeRequest(target=target, payload=msgspec.msgpack.encode(request))
            path = box.workdir / REQUEST_FILE
            path.write_bytes(msgspec.msgpack.encode(req))
            box.give(REQUEST_FILE)
            child.restart_clock(policy.wall_timeout_s)
            child.join_cancel_scope()  # the claiming profile's now: a cancel of it stops this child
            child.resume()
        except BaseException:
            child.finish()
            box.close()
            raise
        return box, child

    def close(self) -> None:
        """No more spares; the waiting ones killed."""
        self._closed = True
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for box, child in spares:
            child.kill()
            child.finish()
            box.close()


__all__ = [
    "HARNESS_TARGET",
    "REFERENCE_TARGET",
    "SERVED",
    "SERVE_TARGET",
    "SPARE_FILE_BYTES",
    "SPARE_START_S",
    "Children",
    "Stage",
    "stage_files",
]
