"""The parent side of a CPU profile: the buffers, the clock and the calls, owned here.

`KernelRunner` lays out room for `sets` buffer sets (every input and output of one call)
in two shared regions (`SharedRegion`, `hardware_agents/sandbox/shm.py`): inputs in one the child can only read,
outputs, each between two canary zones, in one it may write. Pages are allocated only for
the sets a profile uses (the judge sizes its batches from a first measured call, then has
those sets' page tables filled: `populate`). It starts the kernel server
(`hardware_agents.cpu.server`) in the sandbox and then drives it batch by batch:

    while the child is stopped: write inputs, poison outputs, reset canaries, queue the
    command; t0 = clock; SIGCONT; wait until the child has stopped itself; t1 = clock

so the time of a batch is the parent's own clock around work the child could only do
while it ran. The runner never judges: the agent reads the outputs from the parent's
mapping (while the child is stopped) and compares them with references the child never
sees.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from accelopt.problem import Problem
from hardware_agents.cpu.server import ServerArg, ServerCommand, ServerRequest
from hardware_agents.pipeline import buffers, inputgen
from hardware_agents.pipeline.rounds import timed_step
from hardware_agents.sandbox import (
    RanWhileStopped,
    Sandbox,
    SandboxChild,
    SandboxOutcome,
    SharedRegion,
    align_up,
)

CANARY = 4096  # bytes before and after every output (a multiple of 64: outputs stay aligned)
CANARY_BYTE = 0xA5


class KernelDied(Exception):
    """The child exited, crashed or ran out of time during a batch; see `outcome`."""

    def __init__(self, outcome: SandboxOutcome) -> None:
        super().__init__(outcome.error or outcome.status)
        self.outcome = outcome


class BufferSet:
    """The parent's views of one call's buffers."""

    def __init__(
        self, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], canaries: list[np.ndarray]
    ) -> None:
        self.inputs, self.outputs, self.canaries = inputs, outputs, canaries

    def overflowed(self) -> list[str]:
        names = list(self.outputs)
        return sorted({names[i // 2] for i, c in enumerate(self.canaries) if not np.all(c == CANARY_BYTE)})


class KernelRunner:
    def __init__(
        self,
        box: Sandbox,
        problem: Problem,
        *,
        library: str,
        symbol: str,
        sets: int,
        scalars: dict[str, Any],
        timeout_s: float,
    ) -> None:
        """Long because it lays out every buffer set (inputs, outputs, canaries) in the shared
        mappings the kernel server sees, computes each argument's offsets and starts the server
        on them, one layout used by all three."""
        d = problem.definition
        axes = problem.axis_values()
        self.sets = sets
        self._args: list[ServerArg] = []
        in_layout: list[tuple[str, tuple[int, ...], np.dtype]] = []
        out_layout: list[tuple[str, tuple[int, ...], np.dtype]] = []
        for name, ts in d.inputs.items():
            shape = d.shape_of(name, axes)
            if shape is None:
                self._args.append(ServerArg(name=name, role="in", dtype=ts.dtype, scalar=scalars[name]))
            else:
                self._args.append(ServerArg(name=name, role="in", dtype=ts.dtype))
                in_layout.append((name, tuple(shape), np.dtype(inputgen.numpy_dtype(ts.dtype))))
        for name, ts in d.outputs.items():
            shape = d.shape_of(name, axes)
            if shape is None:
                raise ValueError(
                    f"{problem.name}: scalar outputs are not supported by the CPU calling convention"
                )
            self._args.append(ServerArg(name=name, role="out", dtype=ts.dtype))
            out_layout.append((name, tuple(shape), np.dtype(inputgen.numpy_dtype(ts.dtype))))
        in_set = sum(align_up(math.prod(s) * dt.itemsize) for _, s, dt in in_layout)
        out_set = sum(CANARY + align_up(math.prod(s) * dt.itemsize) for _, s, dt in out_layout) + CANARY
        self.set_bytes = sum(math.prod(s) * dt.itemsize for _, s, dt in (*in_layout, *out_layout))
        self.in_region = SharedRegion(in_set * sets, "accelopt-in", child_readonly=True)
        self.out_region = SharedRegion(out_set * sets, "accelopt-out", child_readonly=False)
        self.buffers: list[BufferSet] = []
        offsets: list[list[int]] = []
        for b in range(sets):
            ins, outs, canaries, offs = {}, {}, [], {}
            pos = b * in_set
            for name, shape, dt in in_layout:
                ins[name] = self.in_region.array(pos, shape, dt)
                offs[name] = pos
                pos += align_up(math.prod(shape) * dt.itemsize)
            pos = b * out_set
            for name, shape, dt in out_layout:
                canaries.append(self.out_region.array(pos, (CANARY,), np.uint8))
                pos += CANARY
                outs[name] = self.out_region.array(pos, shape, dt)
                offs[name] = pos
                nbytes = align_up(math.prod(shape) * dt.itemsize)
                pos += nbytes
                canaries.append(self.out_region.array(pos, (CANARY,), np.uint8))
            self.buffers.append(BufferSet(ins, outs, canaries))
            offsets.append([offs.get(a.name, -1) if a.scalar is None else -1 for a in self._args])
        cmd_r, self._cmd_w = os.pipe()
        request = ServerRequest(
            library=library,
            symbol=symbol,
            args=self._args,
            offsets=offsets,
            in_stride=in_set,
            out_stride=out_set,
            cmd_fd=cmd_r,
            in_fd=self.in_region.fd,
            out_fd=self.out_region.fd,
            in_size=self.in_region.size,
            out_size=self.out_region.size,
        )
        try:
            self.child: SandboxChild = box.spawn(
                "hardware_agents.cpu.server:serve",
                request,
                timeout_s=timeout_s,
                pass_fds=(cmd_r, self.in_region.fd, self.out_region.fd),
            )
        finally:
            os.close(cmd_r)
        # every command the child runs is timed at real-time priority where the host allows it
        self.realtime = self.child.time_at_realtime()
        self.in_region.close()
        self.out_region.close()
        self.calls = 0
        self.batch_s: list[float] = []

    def ready(self) -> None:
        """Wait for the server to have loaded the kernel and stopped; KernelDied otherwise."""
        if not self.child.wait_stopped():
            raise KernelDied(self.child.finish())

    def prepare(self, sets: Sequence[int]) -> None:
        """Poison the outputs of `sets` and reset their canaries (the child is stopped)."""
        for b in sets:
            buf = self.buffers[b]
            for arr in buf.outputs.values():
                buffers.poison(arr)
            for c in buf.canaries:
                c.fill(CANARY_BYTE)

    def run(self, sets: Sequence[int]) -> float:
        """One batch: call the kernel once per set, in order; the parent's seconds for it."""
        dt = self._command(ServerCommand(kind="call", sets=list(sets)))
        self.calls += len(sets)
        self.batch_s.append(dt)
        return dt

    def handshake(self) -> float:
        """The seconds of a batch without calls: continue the child, wait for its stop."""
        return self._command(ServerCommand(kind="noop"))

    def populate(self, sets: Sequence[int]) -> None:
        """Have the child fill its page tables for these sets (untimed), so the first timed
        call on a buffer set pays no page faults the kernel did not cause."""
        self._command(ServerCommand(kind="populate", sets=list(sets)))

    def _command(self, command: ServerCommand) -> float:
        cmd = msgspec.msgpack.encode(command)
        os.write(self._cmd_w, len(cmd).to_bytes(4, "little") + cmd)
        try:  # the freeze is checked first: nothing ran since the last stop
            dt = timed_step(self.child)  # from just before the continue to the stop report
        except RanWhileStopped:
            raise KernelDied(self.child.finish()) from None
        if dt is None:
            raise KernelDied(self.child.finish())
        return dt

    @property
    def last_run_cpu_s(self) -> float | None:
        """CPU seconds the kernel's process used in the last command (all its threads)."""
        return self.child.last_run_cpu_s

    def thread_count(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.child.pid}/task"))
        except OSError:
            return 0

    def thread_ids(self) -> list[int]:
        """The kernel server's threads ([] once it has ended: its pid may name another process)."""
        if self.child.exit_status is not None:
            return []
        try:
            return [int(t) for t in os.listdir(f"/proc/{self.child.pid}/task")]
        except OSError:
            return []

    def close(self) -> SandboxOutcome:
        try:
            os.close(self._cmd_w)
        except OSError:
            pass
        return self.child.finish()
