"""Roofline peaks of the NVIDIA GPUs the Triton agent targets (device kinds h100, h200, b200).

All numbers are per GPU, dense (no 2:4 sparsity), from NVIDIA's published specifications:

- H100 SXM5 (80 GB HBM3): NVIDIA H100 Tensor Core GPU datasheet and the NVIDIA H100
  Tensor Core GPU Architecture whitepaper ("Hopper", 2022, table "NVIDIA H100 SXM5"):
  HBM3 3.35 TB/s; BF16/FP16 Tensor 989.4 TFLOPS dense (the datasheet's 1,979 is with
  sparsity); TF32 Tensor 494.7 dense; FP8 Tensor 1,978.9 dense; FP32 (non-tensor) 66.9
  TFLOPS; FP16/BF16 non-tensor 133.8 TFLOPS; L2 50 MB.
- H200 SXM (141 GB HBM3e): NVIDIA H200 Tensor Core GPU datasheet: the same GH100 compute
  as H100 SXM (BF16/FP16 Tensor 1,979 sparse = 989.4 dense, TF32 989 sparse = 494.7 dense,
  FP8 3,958 sparse, FP32 67 TFLOPS) with HBM3e at 4.8 TB/s; L2 50 MB.
- B200 (HGX B200, 1,000 W): NVIDIA Blackwell Architecture Technical Brief and the HGX/DGX
  B200 datasheets: HBM3e 8 TB/s (the HGX B200 table lists 7.7 TB/s per GPU; the higher
  figure keeps the plausibility gate conservative); FP16/BF16 Tensor 2.25 PFLOPS dense
  (4.5 sparse); TF32 Tensor 1.1 PFLOPS dense; FP8 Tensor 4.5 PFLOPS dense; FP32 80
  TFLOPS. NVIDIA publishes no 16-bit non-tensor figure for B200; it is taken as 2x FP32
  (packed half2 FMAs, as on Hopper) and marked derived. L2 126 MB (2 dies).

`peak_matmul_flops` is the BF16/FP16 tensor peak and `peak_vector_flops` the FP32 CUDA-core
peak (the roofline's PEAK_MM and PEAK_VEC, hardware_agents/base.py); `spec_for_dtypes` picks the peaks that apply to a
problem's data types (TF32 tensor cores for fp32 matmuls, FP8 tensor cores for fp8, packed
16-bit vector math when every float tensor is 16-bit), always the fastest legal path, so
the roofline is a true lower bound on time.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from hardware_agents.pipeline.device_spec import DeviceSpec

TB = 1e12
TF = 1e12

_SPECS: dict[str, DeviceSpec] = {
    "h100": DeviceSpec(
        kind="h100",
        name="NVIDIA H100 SXM5 80GB",
        peak_bw_bytes_s=3.35 * TB,
        peak_matmul_flops=989.4 * TF,
        peak_vector_flops=66.9 * TF,
        source="NVIDIA H100 Tensor Core GPU datasheet; NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5)",
        extra={
            "tf32_tensor_flops": "494.7e12",
            "fp8_tensor_flops": "1978.9e12",
            "fp16_vector_flops": "133.8e12",
            "l2_bytes": str(50 << 20),
            "hbm_bytes": str(80 << 30),
            "match": "H100",
        },
    ),
    "h200": DeviceSpec(
        kind="h200",
        name="NVIDIA H200 SXM 141GB",
        peak_bw_bytes_s=4.8 * TB,
        peak_matmul_flops=989.4 * TF,
        peak_vector_flops=66.9 * TF,
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM)",
        extra={
            "tf32_tensor_flops": "494.7e12",
            "fp8_tensor_flops": "1978.9e12",
            "fp16_vector_flops": "133.8e12",
            "l2_bytes": str(50 << 20),
            "hbm_bytes": str(141 << 30),
            "match": "H200",
        },
    ),
    "b200": DeviceSpec(
        kind="b200",
        name="NVIDIA B200 (HGX, 1000 W)",
        peak_bw_bytes_s=8.0 * TB,
        peak_matmul_flops=2250 * TF,
        peak_vector_flops=80 * TF,
        source="NVIDIA Blackwell Architecture Technical Brief; NVIDIA HGX B200 / DGX B200 datasheets",
        extra={
            "tf32_tensor_flops": "1100e12",
            "fp8_tensor_flops": "4500e12",
            "fp16_vector_flops": "160e12 (derived: 2x FP32)",
            "l2_bytes": str(126 << 20),
            "hbm_bytes": str(180 << 30),
            "match": "B200",
        },
    ),
}

GPU_KINDS: tuple[str, ...] = tuple(_SPECS)


def device_spec(kind: str) -> DeviceSpec:
    try:
        return _SPECS[kind]
    except KeyError:
        raise KeyError(f"no NVIDIA spec for device kind {kind!r}; known: {', '.join(GPU_KINDS)}") from None


def _extra_flops(spec: DeviceSpec, key: str, default: float) -> float:
    raw = spec.extra.get(key)
    if not raw:
        return default
    return float(raw.split()[0])


def spec_for_dtypes(spec: DeviceSpec, dtypes: Iterable[str]) -> DeviceSpec:
    """The spec with the peaks that apply to tensors of these dtypes (the fastest legal path).

    Matmul: FP8 tensor cores if any float tensor is fp8, TF32 if the widest float is fp32
    (Triton's `tl.dot` on fp32 uses TF32 by default), else BF16/FP16. Vector: packed 16-bit
    math when every float tensor is 16-bit or narrower, else FP32.
    """
    floats = [d for d in dtypes if d.startswith(("float", "bfloat"))]
    if not floats:
        return spec
    widths = {
        d: 32 if d == "float32" else 8 if d.startswith("float8") else 4 if d.startswith("float4") else 16
        for d in floats
    }
    mm = spec.peak_matmul_flops
    if max(widths.values()) >= 32 and min(widths.values()) >= 16:
        mm = _extra_flops(spec, "tf32_tensor_flops", mm)
    elif min(widths.values()) <= 8:
        mm = _extra_flops(spec, "fp8_tensor_flops", mm)
    vec = spec.peak_vector_flops
    if max(widths.values()) <= 16:
        vec = _extra_flops(spec, "fp16_vector_flops", vec)
    return msgspec.structs.replace(spec, peak_matmul_flops=mm, peak_vector_flops=vec)


def kind_for_gpu_name(name: str) -> str | None:
    """The device kind of a CUDA device name (`torch.cuda.get_device_name`), or None."""
    upper = name.upper()
    for kind, spec in _SPECS.items():
        if spec.extra.get("match", kind.upper()) in upper:
            return kind
    return None


def l2_bytes(spec: DeviceSpec) -> int:
    return int(spec.extra.get("l2_bytes", str(50 << 20)))


INTERPRETABLE_ELEMENTS = 1 << 22
"""Input elements the Triton interpreter checks in seconds to a minute."""
