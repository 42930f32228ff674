"""The plausibility gate of an ESTIMATED latency (the Neuron agent's `emulate` mode).

An estimate is held to the paranoia of a measurement: a program the validator accepted could
still be priced faster than a NeuronCore can run it (a field the validator missed, a figure of
the cost model), and such an estimate is rejected (`incorrect`) as a measurement faster than
the roofline is. The roofline it is held to is the *hard* one, what no program can beat, not
the paper's (whose vector roof counts one FLOP per lane and cycle on two engines, so a fused
instruction, such as softmax's subtract inside the exponential's bias, lets an honest kernel
pass it):

- memory: the problem's minimal bytes (its inputs read once, its outputs written once) at the
  HBM bandwidth, 410 GiB/s per core (the cost model's 16 DMA engines move at most
  16 x 27.2 GB/s, less);
- matmul: its matmul FLOPs at the Tensor Engine's fp32 peak, the roofline's 23.75 TFLOP/s (the
  cost model's 128 x 128 x 2 FLOPs per cycle at 2.8 GHz / 4 for fp32 is 22.9);
- vector: its vector FLOPs at the most the three streaming engines could do if every
  instruction fused the most operators one can: 128 lanes x (Scalar 1.4 GHz x 6 + Vector
  1.12 GHz x 2 + GpSimd 1.4 GHz x 2) = 1.72 TFLOP/s, 6x the roofline's (an activation applies
  its scale, its bias, a function the problem definitions count as up to 3 FLOPs, silu's, and
  accumulates; a Vector or GpSimd instruction applies at most two operators).

The honest kernels' estimates sit at or below 100 % of it by construction (their bytes move at
the DMA engines' rate, below HBM's, and their matmuls at the model's Tensor Engine peak, below
the roofline's); the tests check it on every NKIBench baseline, the `nki_tune` suite and the
emulator's own kernels.
"""

from __future__ import annotations

import msgspec

from accelopt.problem import Problem
from hardware_agents.neuron.emulator.cost import CostSpec
from hardware_agents.pipeline.device_spec import DeviceSpec, t_peak
from hardware_agents.pipeline.roofline import implausible

LANES = 128
HARD_FLOPS_PER_LANE_CYCLE = {"act": 6, "dve": 2, "pool": 2}
ESTIMATE_MAX_PCT_PEAK = 1.0  # an estimate has no clock noise to allow for


def hard_limits(spec: DeviceSpec, cost: CostSpec) -> DeviceSpec:
    """The device's roofline raised to what no program can beat (see the module doc)."""
    hz = {"act": cost.act_hz, "dve": cost.dve_hz, "pool": cost.pool_hz}
    vector = LANES * sum(hz[e] * f for e, f in HARD_FLOPS_PER_LANE_CYCLE.items())
    pe_fp32 = LANES * LANES * 2 * cost.pe_hz / cost.fp32_pe_factor
    return msgspec.structs.replace(
        spec,
        name=f"{spec.name}: what no program can beat",
        peak_bw_bytes_s=max(spec.peak_bw_bytes_s, cost.hbm_bw, cost.dma_engines * cost.dma_engine_bw),
        peak_matmul_flops=max(spec.peak_matmul_flops, pe_fp32),
        peak_vector_flops=max(spec.peak_vector_flops, vector),
        bw_curve=[],
    )


def implausible_estimate(problem: Problem, spec: DeviceSpec, cost: CostSpec, t_est_s: float) -> str | None:
    """Why an estimated latency cannot be real (faster than the hard roofline), or None."""
    hard = hard_limits(spec, cost)
    tp, bound = t_peak(problem, hard)
    return implausible(
        t_est_s,
        tp,
        ESTIMATE_MAX_PCT_PEAK,
        what="ESTIMATED",
        cause=(
            f"judged by the hard roofline no program can beat ({bound}-bound; {hard.peak_bw_bytes_s / 1e9:.4g} "
            f"GB/s HBM, {hard.peak_matmul_flops / 1e12:.4g} TFLOP/s fp32 matmul, "
            f"{hard.peak_vector_flops / 1e12:.4g} TFLOP/s fused vector): the program that was priced "
            "cannot be doing the problem's work"
        ),
    )


__all__ = ["ESTIMATE_MAX_PCT_PEAK", "HARD_FLOPS_PER_LANE_CYCLE", "hard_limits", "implausible_estimate"]
