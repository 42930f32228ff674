"""One kernel's profile as (field, value) lines: what `accelopt profile` prints and what the
dashboard's kernel view shows, so a passed kernel has its profile there too, not only a log."""

from __future__ import annotations

from accelopt.profile import Profile
from replay.render import fmt


def profile_facts(prof: Profile) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("status", str(prof.status))]
    if prof.latency:
        lat = prof.latency
        rows += [
            ("latency (median)", f"{lat.median_ms:.4g} ms"),
            ("min / max", f"{lat.min_ms:.4g} / {lat.max_ms:.4g} ms"),
            (
                "spread (IQR/median)",
                f"{lat.spread:.1%} over {len(lat.samples_ms)} runs, {lat.reruns} re-runs",
            ),
        ]
    if prof.peak_fraction is not None:
        rows.append(("% of peak", fmt.pct(prof.peak_fraction)))
    if prof.bound is not None:
        rows.append(("bound", str(prof.bound)))
    if prof.t_peak_ms is not None:
        rows.append(("T_peak", f"{prof.t_peak_ms:.4g} ms"))
    if prof.correctness:
        rows.append(
            (
                "correctness",
                ", ".join(
                    f"{c.case} {'ok' if c.passed else 'FAIL'}"
                    + (f" (rel {c.rel_l2:.1e})" if c.rel_l2 is not None else "")
                    for c in prof.correctness
                ),
            )
        )
    est = prof.estimate
    if est is not None:  # a cost model's figures, never shown as the latency
        rows.append(("ESTIMATED latency", f"{est.latency_ms:.4g} ms ({est.model}; not measured)"))
        if est.peak_fraction is not None:
            rows.append(("ESTIMATED % of peak", f"{fmt.pct(est.peak_fraction)} ({est.bound}-bound)"))
        rows.append(("ESTIMATED engines", ", ".join(f"{k} {v:.3g} ms" for k, v in est.engines_ms.items())))
    if prof.counters:
        rows.append(("counters", ", ".join(f"{k} {v:.4g}" for k, v in sorted(prof.counters.items()))))
    if prof.isolation:
        rows.append(("isolation", ", ".join(f"{k} {v}" for k, v in sorted(prof.isolation.items()))))
    if prof.toolchain:
        rows.append(("toolchain", ", ".join(f"{k} {v}" for k, v in sorted(prof.toolchain.items()))))
    rows.append(("device", prof.device))
    rows.append(("wall time", f"{prof.wall_s:.2f} s"))
    return rows
