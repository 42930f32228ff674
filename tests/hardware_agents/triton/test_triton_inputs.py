"""Inputs of Triton workloads: synthesized paged-KV indices satisfy the definition's
constraints, safetensors inputs are loaded (and a missing file is an error naming it),
scalars come from the workload, everything is deterministic per seed."""

from __future__ import annotations

import msgspec
import pytest
import torch

from accelopt.problem import SafetensorsInput, Workload
from hardware_agents.pipeline import inputgen
from hardware_agents.triton.inputs import InputError, case_inputs, synthesized_inputs

GQA = "gqa_paged_decode_h32_kv8_d128_ps1"


@pytest.mark.parametrize(
    "axes",
    [
        {"batch_size": 2, "num_pages": 64, "len_indptr": 3, "num_kv_indices": 37},
        {"batch_size": 7, "num_pages": 9, "len_indptr": 8, "num_kv_indices": 5},  # fewer pages than requests
        {"batch_size": 1, "num_pages": 4, "len_indptr": 2, "num_kv_indices": 12},  # pages reused
    ],
)
@pytest.mark.parametrize("seed", [0, 21])
def test_paged_indices_satisfy_the_constraints(triton_suite, axes, seed):
    p = triton_suite[GQA]
    assert synthesized_inputs(p.definition) == ["kv_indptr", "kv_indices"]
    w = msgspec.structs.replace(p.workload, axes=axes)
    tensors, scalars = case_inputs(p.definition, w, inputgen.InputCase(name="s", seed=seed))
    indptr, indices = tensors["kv_indptr"], tensors["kv_indices"]
    assert indptr.dtype == indices.dtype == torch.int32
    assert indptr.shape == (axes["len_indptr"],) and int(indptr[0]) == 0
    assert int(indptr[-1]) == axes["num_kv_indices"] == indices.numel()  # num_kv_indices == kv_indptr[-1]
    assert bool((indptr[1:] >= indptr[:-1]).all())
    if axes["num_kv_indices"] >= axes["batch_size"]:
        assert bool((indptr[1:] > indptr[:-1]).all())  # every request has a page
    assert int(indices.min()) >= 0 and int(indices.max()) < axes["num_pages"]
    if axes["num_kv_indices"] <= axes["num_pages"]:
        assert indices.unique().numel() == indices.numel()
    assert tensors["q"].dtype == torch.bfloat16 and tensors["k_cache"].shape == (axes["num_pages"], 1, 8, 128)
    assert scalars == {"sm_scale": pytest.approx(128**-0.5)}
    again, _ = case_inputs(p.definition, w, inputgen.InputCase(name="s", seed=seed))
    assert all(torch.equal(tensors[k], again[k]) for k in tensors)


def test_safetensors_inputs_are_loaded(triton_suite, tmp_path):
    from safetensors.torch import save_file

    p = triton_suite["rmsnorm_h4096"]
    x = torch.randn(3, 4096).to(torch.bfloat16)
    save_file({"hs": x}, str(tmp_path / "blob.safetensors"))
    w = Workload(
        uuid="st",
        axes={"batch_size": 3},
        inputs={"hidden_states": SafetensorsInput(path="blob.safetensors", tensor_key="hs")},
    )
    tensors, _ = case_inputs(p.definition, w, inputgen.InputCase(name="s", seed=0), roots=[tmp_path])
    assert torch.equal(tensors["hidden_states"], x) and tensors["weight"].shape == (4096,)


def test_missing_or_wrong_safetensors_is_a_clear_error(triton_suite, tmp_path):
    from safetensors.torch import save_file

    p = triton_suite["rmsnorm_h4096"]
    case = inputgen.InputCase(name="s", seed=0)
    missing = Workload(
        uuid="m",
        axes={"batch_size": 3},
        inputs={"hidden_states": SafetensorsInput(path="blob/gone.safetensors", tensor_key="hs")},
    )
    with pytest.raises(InputError, match=r"blob/gone\.safetensors.*not found"):
        case_inputs(p.definition, missing, case, roots=[tmp_path])
    (tmp_path / "blob").mkdir()
    (tmp_path / "blob" / "lfs.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:x\n"
    )
    lfs = msgspec.structs.replace(
        missing, inputs={"hidden_states": SafetensorsInput(path="blob/lfs.safetensors", tensor_key="hs")}
    )
    with pytest.raises(InputError, match="Git LFS pointer"):
        case_inputs(p.definition, lfs, case, roots=[tmp_path])
    save_file({"hs": torch.zeros(2, 4096, dtype=torch.bfloat16)}, str(tmp_path / "blob" / "bad.safetensors"))
    bad = msgspec.structs.replace(
        missing, inputs={"hidden_states": SafetensorsInput(path="blob/bad.safetensors", tensor_key="hs")}
    )
    with pytest.raises(InputError, match=r"shape \(2, 4096\)"):
        case_inputs(p.definition, bad, case, roots=[tmp_path])
