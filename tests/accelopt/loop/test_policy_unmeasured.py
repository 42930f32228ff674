"""Correct but untimed kernels (Triton in the interpreter on a host without a GPU) may enter
the beam after every measured kernel, so a CPU-only search still explores from correct
kernels; a failed kernel never does, and an untimed one never outranks a timed one."""

from __future__ import annotations

from accelopt.beam_policy import Scored, best_of, select_beam


def k(
    kid: str, order: int, *, ms: float | None = None, unmeasured: bool = False, failed: bool = False
) -> Scored:
    return Scored(
        kid, ms, passed=ms is not None and not failed, source_hash=kid, order=order, unmeasured=unmeasured
    )


def test_unmeasured_kernels_fill_the_beam_after_measured_ones():
    beam = [k("base", 0, unmeasured=True)]
    plans = [[k("a", 1, unmeasured=True)], [k("b", 2, failed=True)], [k("c", 3, ms=2.0)]]
    assert [s.kernel_id for s in select_beam(beam, plans, 3)] == ["c", "base", "a"]
    assert [s.kernel_id for s in select_beam(beam, plans, 1)] == ["c"]


def test_a_plan_whose_samples_are_untimed_still_contributes_its_first_correct_one():
    assert (
        best_of([k("x", 5, failed=True), k("y", 6, unmeasured=True), k("z", 7, unmeasured=True)]).kernel_id
        == "y"
    )
    assert best_of([k("y", 6, unmeasured=True), k("t", 8, ms=1.0)]).kernel_id == "t"
    assert best_of([k("x", 5, failed=True)]) is None


def test_an_all_untimed_search_keeps_exploring_but_the_earliest_stays_first():
    beam = [k("base", 0, unmeasured=True)]
    plans = [[k("a", 1, unmeasured=True)], [k("b", 2, unmeasured=True)]]
    assert [s.kernel_id for s in select_beam(beam, plans, 2)] == ["base", "a"]
