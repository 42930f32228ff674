"""Fixtures shared by the read side's tests (the report and the dashboard): synthetic run logs
from `replay.synthetic` and a writer of exported log files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from accelopt import catalog as ev


@pytest.fixture(scope="session")
def synthetic() -> Callable[..., list[ev.Event]]:
    from replay.synthetic import synthetic_run

    return synthetic_run


def write_log(events: list[ev.Event], path: Path) -> Path:
    from events.logfile import write_events

    return write_events(path, events)


@pytest.fixture(scope="session")
def export_log() -> Callable[[list[ev.Event], Path], Path]:
    return write_log
