"""What a hardware agent returns for one kernel: the `Profile` record (see hardware_agents/README.md)."""

from __future__ import annotations

import math
from typing import Literal, get_args

import msgspec

# The statuses are generic: what a family adds is a reason code (`Profile.reason`, its own
# words, e.g. the Triton family's `no_triton_launch`: `incorrect`, its checks launched no Triton
# kernel). timing_mismatch: a timer inside the kernel's process disagreed with the trusted side's clock;
# sandbox_error: the sandbox could not apply the isolation untrusted code requires (the machine's
# fault, not the kernel's: see hardware_agents/README.md).
# unchecked: nothing ran: this host's checker cannot run the problem in reasonable time (a
# production shape the Triton interpreter would take hours on, with no smaller check workload);
# the log says why and where to check it (a GPU). Neither correct nor the kernel's failure.
ProfileStatus = Literal[
    "passed",
    "compile_error",
    "runtime_error",
    "incorrect",
    "timeout",
    "timing_mismatch",
    "sandbox_error",
    "unmeasured",
    "unchecked",
]
PROFILE_STATUSES: tuple[ProfileStatus, ...] = get_args(ProfileStatus)  # in the order tables show them
# the kernel's own failures: a fixer is asked to repair them (sandbox_error is the machine's)
KERNEL_FAILURES: frozenset[ProfileStatus] = frozenset(
    {"compile_error", "runtime_error", "incorrect", "timeout", "timing_mismatch"}
)
Bound = Literal["memory", "matmul", "vector"]


def peak_fraction(t_peak: float | None, t_measured: float | None) -> float | None:
    """The fraction of peak: T_peak / t (in the same unit), 1.0 = on the roofline. The one
    place it is computed: every `peak_fraction` field (profiles, estimates, beam members, a
    re-measure's sides; `pct_peak` on the wire, as recorded logs have it) holds this
    fraction, never a percentage; shown as % by
    `replay/render/fmt.pct`. None where T_peak is unknown or t is not a positive finite time."""
    if not t_peak or t_measured is None or not math.isfinite(t_measured) or t_measured <= 0:
        return None
    return t_peak / t_measured


class SeedCheck(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Correctness of one input set (a seed or a named adversarial case)."""

    case: str
    passed: bool
    rel_l2: float | None = None
    max_abs_err: float | None = None
    # FlashInfer-Bench's max_relative_error: max over elements of |got - ref| / (|ref| + 1e-8)
    max_rel_err: float | None = None
    note: str = ""


class LatencyStats(msgspec.Struct, kw_only=True):
    samples_ms: list[float]
    median_ms: float
    min_ms: float
    max_ms: float
    spread: float
    reruns: int = 0


class Estimate(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An ESTIMATED latency: a cost model's figure for a kernel that was checked for
    correctness but not timed (e.g. NKI in the emulator, without a Trainium). Never a
    measurement: it lives apart from `Profile.latency`/`peak_fraction`, and only estimated kernels
    are ranked by it (see accelopt/beam_policy.py)."""

    latency_ms: float
    # of the same roofline as measured profiles (`pct_peak` on the wire)
    peak_fraction: float | None = msgspec.field(default=None, name="pct_peak")
    t_peak_ms: float | None = None
    bound: str = ""  # the engine that sets the estimate
    engines_ms: dict[str, float] = {}  # busy time per engine
    model: str = ""  # the cost model and its version
    detail: dict[str, float] = {}  # instructions, HBM bytes, spill bytes, peak SBUF/PSUM


class Profile(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: ProfileStatus
    device: str
    # why, in the family's own words where its status is not all of it: a code the family owns
    # (`hardware_agents/<family>`), e.g. "no_triton_launch"; "" where the status says it all
    reason: str = ""
    log: str = ""
    correctness: list[SeedCheck] = []
    latency: LatencyStats | None = None
    t_peak_ms: float | None = None
    # a fraction: peak_fraction(t_peak_ms, latency.median_ms) (`pct_peak` on the wire, as
    # recorded logs have it)
    peak_fraction: float | None = msgspec.field(default=None, name="pct_peak")
    bound: Bound | None = None
    counters: dict[str, float] = {}
    toolchain: dict[str, str] = {}
    wall_s: float = 0.0
    isolation: dict[str, str] = {}  # what the sandbox applied (uid, landlock, seccomp, network)
    estimate: Estimate | None = None  # status `unmeasured` only: a cost model's estimate, not a measurement

    def __post_init__(self) -> None:
        """A profile that cannot lie about itself: what its status says must agree with its
        fields, checked when it is built (by an agent, by `msgspec.structs.replace`, and when a
        log is decoded). A `passed` kernel was timed (a positive latency); a `compile_error`
        never ran, so it has no latency and no fraction of peak."""
        if self.status == "passed":
            median = self.latency.median_ms if self.latency is not None else None
            if median is None or not math.isfinite(median) or median <= 0:
                raise ValueError(f"a passed profile needs a positive latency (got {median!r})")
        elif self.status == "compile_error" and (self.latency is not None or self.peak_fraction is not None):
            raise ValueError("a compile_error profile never ran: it has no latency and no fraction of peak")

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def latency_ms(self) -> float | None:
        return self.latency.median_ms if self.latency else None

    @property
    def estimated_ms(self) -> float | None:
        """The estimated latency of a correct, unmeasured kernel (None for everything else)."""
        return self.estimate.latency_ms if self.estimate is not None and self.status == "unmeasured" else None
