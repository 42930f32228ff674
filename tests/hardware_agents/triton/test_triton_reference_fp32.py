"""The reference harness computes in full float32 (`reference.full_float32`): with TF32 on
(cuDNN's default for convolutions on a GPU), the references and the float32 floor measured
from them would be TF32's, and a TF32 kernel would pass. No GPU here: the flags are what
torch reads on one, checked in-process after a real reference run on the CPU."""

from __future__ import annotations

from pathlib import Path

import msgspec
import torch

from hardware_agents.triton.records import TensorMeta
from hardware_agents.triton.reference import RefCase, RefRequest, run_reference


def test_the_reference_turns_tf32_off(tmp_path: Path) -> None:
    torch.save({"x": torch.ones(4)}, tmp_path / "in.pt")
    req = RefRequest(
        definition="double",
        source="def run(x):\n    return x * 2\n",
        inputs=[TensorMeta(name="x", dtype="float32", shape=[4])],
        outputs=["y"],
        cases=[RefCase(name="c", inputs_file=str(tmp_path / "in.pt"))],
    )
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        res = run_reference(msgspec.msgpack.encode(req), tmp_path)
        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    assert torch.equal(torch.load(tmp_path / res.files["c"])["y"], torch.full((4,), 2.0))
