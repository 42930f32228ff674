"""Fixtures shared by the read side's tests (the report and the dashboard): synthetic run logs
from `replay.synthetic`, a writer of exported log files, and one real run that both read."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from testdirs import HEADROOM_SUITE

from accelopt import catalog as ev

# The real run: a test-only problem whose tunable has a large real effect
# (tests/accelopt/loop/headroom_suite), so the tuner surely improves it within two
# iterations (on the CPU suite an "improvement" within noise may or may not happen).
REAL_SUITE = str(HEADROOM_SUITE)
REAL_PROBLEM = "rownorm"
REAL_ITERATIONS = 2


@dataclass
class SharedRun:
    """One real run (real NATS, Ray, compiled CPU kernels, the offline `builtin/tuner`; memory
    on, and each problem ending with its interleaved re-measure) for every test of the read
    side: the dashboard's browser tests open its page before it starts and watch it live (they
    run first), the report tests read what it recorded. `start()` is idempotent; `wait()`
    starts it if nobody has (e.g. without a browser) and returns its outcome."""

    cfg: Any
    problem: Any
    nats_url: str
    run_id: str
    root: Path
    timeout_s: float = 780.0
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _outcome: list = field(default_factory=list)
    _error: list = field(default_factory=list)

    def start(self) -> None:
        from actors.runtime.session import SessionOptions, run_session

        def go() -> None:
            try:
                self._outcome.append(
                    run_session(
                        self.cfg,
                        [self.problem],
                        SessionOptions(nats_url=self.nats_url, run_id=self.run_id, timeout_s=self.timeout_s),
                    )
                )
            except BaseException as e:
                self._error.append(e)

        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=go, name="shared-real-run", daemon=True)
                self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def wait(self, timeout: float = 840.0) -> Any:
        self.start()
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the shared real run did not end in time"
        if self._error:
            raise self._error[0]
        return self._outcome[0]


@pytest.fixture(scope="session")
def shared_real_run(ray_session, shared_nats, tmp_path_factory) -> SharedRun:
    import suites
    from accelopt.config import build_config
    from actors.runtime.session import new_run_id

    tmp = tmp_path_factory.mktemp("real-run")
    root = tmp / "runs"
    root.mkdir()
    cfg = build_config(
        preset="quick",
        overrides=[
            f"root={root}",
            f"memory.uri={tmp / 'memory'}",
            f"suite={REAL_SUITE}",
            f"problems=[{REAL_PROBLEM}]",
            f"search.iterations={REAL_ITERATIONS}",
            "search.plans_per_candidate=2",
            "profiling.timeout_s=60",
        ],
    )
    return SharedRun(
        cfg, suites.get_problem(f"{REAL_SUITE}/{REAL_PROBLEM}"), shared_nats.url, new_run_id(), root
    )


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
