"""Device specs of the NVIDIA kinds (cited peaks), the peaks a problem's dtypes select, GPU
name matching, and the registry: `get_agent("h100")` etc. give Triton agents."""

from __future__ import annotations

import pytest

from hardware_agents.families import available_devices, get_agent, registered_kinds
from hardware_agents.triton import GPU_KINDS, TritonAgent, device_spec, kind_for_gpu_name, spec_for_dtypes
from hardware_agents.triton.specs import __doc__ as SPECS_DOC


def test_cited_peaks():
    h100, h200, b200 = (device_spec(k) for k in ("h100", "h200", "b200"))
    assert (
        h100.peak_bw_bytes_s == 3.35e12 and h200.peak_bw_bytes_s == 4.8e12 and b200.peak_bw_bytes_s == 8.0e12
    )
    assert h100.peak_matmul_flops == pytest.approx(989.4e12) == h200.peak_matmul_flops
    assert b200.peak_matmul_flops == pytest.approx(2.25e15)
    assert h100.peak_vector_flops == pytest.approx(66.9e12) and b200.peak_vector_flops == pytest.approx(80e12)
    for spec in (h100, h200, b200):
        assert "datasheet" in spec.source.lower() or "brief" in spec.source.lower()
        assert not spec.measured and spec.extra["tf32_tensor_flops"] and spec.extra["l2_bytes"]
    assert "whitepaper" in SPECS_DOC and "H200 Tensor Core GPU datasheet" in SPECS_DOC and "B200" in SPECS_DOC


def test_dtype_specific_peaks():
    h100 = device_spec("h100")
    bf16 = spec_for_dtypes(h100, ["bfloat16", "int32"])
    assert bf16.peak_matmul_flops == pytest.approx(989.4e12) and bf16.peak_vector_flops == pytest.approx(
        133.8e12
    )
    fp32 = spec_for_dtypes(h100, ["float32"])
    assert fp32.peak_matmul_flops == pytest.approx(494.7e12) and fp32.peak_vector_flops == pytest.approx(
        66.9e12
    )
    fp8 = spec_for_dtypes(h100, ["float8_e4m3fn", "bfloat16"])
    assert fp8.peak_matmul_flops == pytest.approx(1978.9e12)
    assert spec_for_dtypes(h100, ["int32"]) == h100


def test_gpu_names_map_to_kinds():
    assert kind_for_gpu_name("NVIDIA H100 80GB HBM3") == "h100"
    assert kind_for_gpu_name("NVIDIA H200") == "h200"
    assert kind_for_gpu_name("NVIDIA B200") == "b200"
    assert kind_for_gpu_name("NVIDIA A100-SXM4-80GB") is None


def test_registered_and_available_without_a_gpu(tmp_path):
    assert set(GPU_KINDS) <= set(registered_kinds())
    assert set(GPU_KINDS) <= set(available_devices())  # the interpreter makes them usable anywhere
    for kind in GPU_KINDS:
        agent = get_agent(kind, cache_dir=tmp_path, mode="interpreter")
        try:
            assert isinstance(agent, TritonAgent) and agent.kind == kind and agent.spec.kind == kind
            assert agent.languages == ("triton", "python") and agent.mode == "interpreter"
        finally:
            agent.close()


def test_auto_mode_without_a_matching_gpu_is_the_interpreter(tmp_path, monkeypatch):
    from hardware_agents.triton import gpu

    here = list(gpu.discover())
    expected = "cuda" if any(kind_for_gpu_name(g.name) == "b200" for g in here) else "interpreter"
    agent = get_agent("b200", cache_dir=tmp_path)
    try:
        assert agent.mode == expected  # this host's real answer
    finally:
        agent.close()
    # a host with only an H100: the b200 agent interprets, and says which GPU it saw
    monkeypatch.setattr(gpu, "discover", lambda: [gpu.GpuInfo(index=0, name="NVIDIA H100 80GB HBM3")])
    agent = get_agent("b200", cache_dir=tmp_path)
    try:
        assert agent.mode == "interpreter" and agent.gpu_infos == []
        assert agent.mode_note.startswith(f"no {agent.spec.name} on this host")
        assert "GPUs here: NVIDIA H100 80GB HBM3" in agent.mode_note and "not timed" in agent.mode_note
    finally:
        agent.close()
    with pytest.raises(RuntimeError, match="mode 'cuda'"):
        get_agent("b200", cache_dir=tmp_path, mode="cuda")
