"""triton/data.py's input_metas and output_metas: each side of the definition, its shapes at the
workload's axes (one `_metas` for both)."""

from __future__ import annotations

import suites
from hardware_agents.triton.data import input_metas, output_metas
from hardware_agents.triton.records import TensorMeta


def test_inputs_and_outputs_each_their_own_side_at_the_workloads_axes() -> None:
    p = suites.get_problem("triton/rmsnorm_h4096")
    assert input_metas(p.definition, p.workload) == [
        TensorMeta(name="hidden_states", dtype="bfloat16", shape=[8192, 4096]),
        TensorMeta(name="weight", dtype="bfloat16", shape=[4096]),
    ]
    assert output_metas(p.definition, p.workload) == [
        TensorMeta(name="output", dtype="bfloat16", shape=[8192, 4096])
    ]
