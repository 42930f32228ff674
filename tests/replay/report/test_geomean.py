"""The one geometric mean every report, the remeasure table and the benchmarks use."""

from __future__ import annotations

import pytest

from replay.summary import geomean


def test_skips_missing_values_unless_every_value_is_required():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, None, 8.0, 0.0]) == pytest.approx(4.0)
    assert geomean([2.0, None, 8.0], strict=True) is None
    assert geomean([None]) is None and geomean([]) is None
    assert geomean(iter([1.0, 4.0]), strict=True) == pytest.approx(2.0)
