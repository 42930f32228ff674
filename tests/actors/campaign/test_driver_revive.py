"""The campaign driver's loop asks the pool to start dead agents again every REVIVE_EVERY_S;
that housekeeping step talks to Ray, and a Ray failure there (here a pool whose `revive`
raises, as `ray.wait` or an actor's start does when the cluster is going: a stand-in, as
provoking it needs a cluster to break) is said as a warning and tried again, and does not
end the campaign. The real revive is tested with real Ray in tests/actors/pool/."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.runtime import campaign
from actors.runtime.campaign import CampaignDriver


class _RayGone:
    def __init__(self) -> None:
        self.calls = 0

    def revive(self) -> list[str]:
        self.calls += 1
        raise RuntimeError("the GCS is unreachable")


class _OneRevived:
    def revive(self) -> list[str]:
        return ["profiler-cpu-0: killed"]

    def deaths(self) -> list[str]:
        return []


def test_a_failing_revive_is_a_warning_not_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(campaign, "REVIVE_EVERY_S", 0.0)
    driver = CampaignDriver("c1", root=str(tmp_path), note=lambda _text: None)
    pool = _RayGone()
    driver._loop(pool)  # type: ignore[arg-type]  # nothing runs or waits: one turn, then it returns
    assert pool.calls == 1
    assert len(driver.warnings) == 1 and "the GCS is unreachable" in driver.warnings[0], driver.warnings


def test_a_revived_agent_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(campaign, "REVIVE_EVERY_S", 0.0)
    driver = CampaignDriver("c1", root=str(tmp_path), note=lambda _text: None)
    driver._loop(_OneRevived())  # type: ignore[arg-type]
    assert driver.warnings == ["agent started again after its actor died for good: profiler-cpu-0: killed"]
