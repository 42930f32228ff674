"""The most memory an emulated profile of a problem holds, declared before it runs.

What a Neuron agent's profile reserves of the host's memory before it runs (`profile_bytes`,
through `NeuronAgent.memory_bytes` and hardware_agents/host_memory.py: whoever starts the
profile, a Ray profiler actor of a run or a campaign included), from the problem's inputs,
outputs and references alone, in one place. Written for the emulate mode, where it is measured
(benchmarks/nki_memory_bench.py: declared >= measured on every NKIBench problem, the figures
in docs/neuron.md). The parts, each bounded by the code that holds it:
- the agent process itself (`AGENT_BYTES`: the interpreter, numpy, the emulator's programs);
- the staged inputs of every case (float32 files in the sandboxes' base, `/dev/shm`: memory),
  the seeds' and those drawn after tracing;
- the float64 reference evaluations under way at once (`slices.EVALUATIONS`, each
  `slices.reference_bytes`: one slice's inputs, outputs and the formula's temporaries);
- the execute children side by side (`groups.py`: at most `lanes`), each its own process
  (`CHILD_BYTES`), its batch's device memory (at most `emulate_mode.EXECUTE_BATCH_BYTES`, or
  one case's inputs and outputs where they are more), its cases' on-chip tiles (an allowance:
  what the reference's temporaries take in float32, a third of `work` outputs, at least
  `TILE_BYTES`; gqa_full's baseline holds its attention scores on chip) and its group's
  outputs in its tmpfs work dir.
"""

from __future__ import annotations

import math

from accelopt.problem import Problem
from hardware_agents.neuron import slices
from hardware_agents.neuron.data import output_bytes_of, stage_threads
from hardware_agents.neuron.emulate_mode import EXECUTE_BATCH_BYTES, fresh_kinds
from hardware_agents.neuron.groups import GROUP_OUTPUT_BYTES, plan_groups

AGENT_BYTES = 512 << 20
CHILD_BYTES = 256 << 20
TILE_BYTES = 256 << 20


def input_bytes(problem: Problem) -> int:
    """One case's inputs as staged (float32, 4 bytes an element)."""
    return sum(4 * math.prod(s) for s in problem.input_shapes().values() if s is not None)


def case_count(problem: Problem, seeds: int) -> int:
    """The cases a profile runs: its `seeds` and those drawn after tracing (`fresh_kinds`)."""
    return seeds + len(fresh_kinds(problem))


def tile_bytes(problem: Problem) -> int:
    """The on-chip tiles an execute child is allowed for one case (the module doc)."""
    d = problem.definition
    sl = d.x_reference_slices
    work = sl.work if sl is not None else d.x_reference_work or slices.WHOLE_WORK
    return max(TILE_BYTES, int(work / 3 * sum(output_bytes_of(problem).values())))


def profile_bytes(problem: Problem, seeds: int, lanes: int | None = None) -> int:
    """The most memory an emulated profile of `problem` on `seeds` correctness seeds holds at
    once (the module doc's parts), with `lanes` execute children side by side (default: this
    host's, `stage_threads`)."""
    lanes = lanes or stage_threads()
    n = case_count(problem, seeds)
    per_input = input_bytes(problem)
    per_output = sum(output_bytes_of(problem).values())
    groups = plan_groups(n, per_output, lanes)
    biggest = max(len(g) for g in groups)
    device = max(min(EXECUTE_BATCH_BYTES, biggest * (per_input + per_output)), per_input + per_output)
    outputs = min(biggest * per_output, max(per_output, GROUP_OUTPUT_BYTES))
    child = CHILD_BYTES + device + tile_bytes(problem) + outputs
    references = slices.EVALUATIONS * slices.reference_bytes(problem)
    return AGENT_BYTES + n * per_input + references + min(lanes, len(groups)) * child


__all__ = [
    "AGENT_BYTES",
    "CHILD_BYTES",
    "TILE_BYTES",
    "case_count",
    "input_bytes",
    "profile_bytes",
    "tile_bytes",
]
