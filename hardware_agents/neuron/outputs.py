"""Where a sandboxed child leaves a case's outputs for the agent: `out/<case>/<j>.npy` under its
work dir, each named in the case's `CaseRun.outputs` (the device harness and the emulator's
child both write them; the agent reads only the files named there)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from hardware_agents.neuron.protocol import CaseRun


def save_outputs(workdir: Path, run: CaseRun, outs: Iterable[Any]) -> None:
    """Write the case `run`'s outputs (arrays, in the kernel's order) and name them in it."""
    odir = workdir / "out" / run.name
    odir.mkdir(parents=True, exist_ok=True)
    for j, arr in enumerate(outs):
        rel = f"out/{run.name}/{j}.npy"
        np.save(workdir / rel, np.ascontiguousarray(arr), allow_pickle=False)
        run.outputs.append(rel)
