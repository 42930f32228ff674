"""Roofline peaks of one NeuronCore, as the paper counts them (see docs/neuron.md).

Every figure is per physical NeuronCore, because a profile pins exactly one core
(`NEURON_RT_VISIBLE_CORES`, `--logical-nc-config=1`); all tensors are fp32.

trn1 (NeuronCore-v2), the paper's constants:
- bandwidth 410 GiB/s = 440.2 GB/s: half of the Trainium chip's 820 GiB/s HBM (two cores
  per chip);
- matmul 23.75 TFLOP/s fp32: half of the chip's 47.5 FP32 TFLOPS;
- vector 286.72 GFLOP/s: 2 engines (Vector + Scalar) x 128 lanes x 1.12 GHz.

trn2 (NeuronCore-v3), from AWS's Trainium2 documentation (the reference code has none):
- bandwidth 2.9 TB/s / 8 cores = 362.5 GB/s ("96 GiB of device memory with 2.9 TB/sec of
  bandwidth", eight NeuronCore-v3 per chip);
- matmul 181 FP32 TFLOPS / 8 = 22.625 TFLOP/s (the per-core NKI guide rounds the Tensor
  Engine to "20 FP32 dense TFLOPS"; the chip figure / cores is the same rule as trn1's and
  is the higher, so the roofline never flatters a kernel);
- vector 399.36 GFLOP/s: the Vector Engine's 256 fp32 elements/cycle at 0.96 GHz plus the
  Scalar Engine's 128 elements/cycle at 1.2 GHz (NKI Trainium2 architecture guide,
  "Compute Engine Specifications"). Counting both engines at the Vector clock, as the
  paper's trn1 figure does, would give (256 + 128) x 0.96 = 368.64 GFLOP/s; each engine at
  its own clock is the true upper bound, so that is the one used.
"""

from __future__ import annotations

from hardware_agents.pipeline.device_spec import DeviceSpec

TRN1_SOURCE = (
    "AccelOpt paper / NKIBench (arXiv 2511.15915) per NeuronCore-v2: PEAK_BW 410 GiB/s (half of the "
    "chip's 820 GiB/s HBM), PEAK_MM 47.5/2 TFLOP/s fp32, PEAK_VEC 2 x 128 lanes x 1.12 GHz; AWS Neuron "
    "docs, Trainium Architecture (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/"
    "neuron-hardware/trainium.html)"
)
TRN2_SOURCE = (
    "AWS Neuron docs, Trainium2 Architecture (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
    "general/arch/neuron-hardware/trainium2.html): 8 NeuronCore-v3 per chip, 181 FP32 TFLOPS, 2.9 TB/s "
    "HBM; NKI Trainium2 Architecture Guide (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/"
    "arch/trainium2_arch.html): Vector Engine 256 fp32 elements/cycle at 0.96 GHz, Scalar Engine 128 "
    "elements/cycle at 1.2 GHz. Per core: 2.9e12/8 B/s, 181e12/8 FLOP/s, 256*0.96e9 + 128*1.2e9 FLOP/s"
)

TRN1 = DeviceSpec(
    kind="trn1",
    name="AWS Trainium1, one NeuronCore-v2",
    peak_bw_bytes_s=410 * 2**30,  # 440.2 GB/s
    peak_matmul_flops=47.5e12 / 2,  # 23.75 TFLOP/s fp32
    peak_vector_flops=2 * 128 * 1.12e9,  # 286.72 GFLOP/s
    source=TRN1_SOURCE,
    measured=False,
    extra={
        "cores_per_chip": "2",
        "sbuf_per_partition_bytes": str(192 * 1024),
        "partitions": "128",
        "psum_free_max_fp32": "512",
    },
)

TRN2 = DeviceSpec(
    kind="trn2",
    name="AWS Trainium2, one NeuronCore-v3 (LNC=1)",
    peak_bw_bytes_s=2.9e12 / 8,  # 362.5 GB/s
    peak_matmul_flops=181e12 / 8,  # 22.625 TFLOP/s fp32
    peak_vector_flops=256 * 0.96e9 + 128 * 1.2e9,  # 399.36 GFLOP/s
    source=TRN2_SOURCE,
    measured=False,
    extra={
        "cores_per_chip": "8",
        "sbuf_per_partition_bytes": str(224 * 1024),
        "partitions": "128",
        "psum_free_max_fp32": "512",
        "vector_peak_at_vector_clock_flops": str((256 + 128) * 0.96e9),
    },
)

SPECS: dict[str, DeviceSpec] = {"trn1": TRN1, "trn2": TRN2}

__all__ = ["SPECS", "TRN1", "TRN2"]
