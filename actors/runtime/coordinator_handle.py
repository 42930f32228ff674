"""The run's coordinator as the session sees it: a Ray actor, or a thread of this process.

A run that starts its own agents hosts its coordinator in Ray like every other actor (Ray
restarts it if its process dies). A run attached to a warm agent pool (`accelopt up`,
`accelopt/pool.py`) needs no Ray at all: its coordinator runs on a thread of the CLI's
process, which saves Ray's start-up. Either way the coordinator only talks to the log, and a
coordinator that dies is replaced by `accelopt resume`, which re-derives its state from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from actors.roles.coordinator import CoordinatorReport
    from actors.runtime.deployment import Hosted


class CoordinatorHandle(Protocol):
    def problem(self) -> str | None:
        """Why the coordinator stopped early (crashed, or ended unfinished); None while it runs."""

    def warnings(self, timeout_s: float = 10.0) -> list[str]:
        """The warnings of its final report (none if it does not report within `timeout_s`)."""

    def stop(self) -> None: ...


def _verdict(report: CoordinatorReport) -> str | None:
    return None if report.finished else f"coordinator ended without finishing: {report}"


class RayCoordinator:
    def __init__(self, hosted: Hosted) -> None:
        self.hosted = hosted

    def problem(self) -> str | None:
        import ray

        done, _ = ray.wait([self.hosted.run_ref], timeout=0)
        if not done:
            return None
        try:
            return _verdict(ray.get(done[0]))
        except Exception as e:
            return f"coordinator crashed: {e}"

    def warnings(self, timeout_s: float = 10.0) -> list[str]:
        import ray

        with contextlib.suppress(Exception):
            done, _ = ray.wait([self.hosted.run_ref], timeout=timeout_s)
            if done:
                return list(ray.get(done[0]).warnings)
        return []

    def stop(self) -> None:  # the deployment stops every actor it started
        pass


class LocalCoordinator:
    """`CoordinatorService` on a daemon thread with its own event loop."""

    def __init__(self, nats_url: str, run_id: str) -> None:
        from actors.roles.coordinator import CoordinatorService
        from actors.runtime.deaths import stall_hint

        # a stall names the death this process saw of the agent it waits on (deaths.py)
        self.service = CoordinatorService(nats_url, run_id, stall_hint=stall_hint)
        self.report: CoordinatorReport | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=f"coordinator-{run_id}", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            self.report = asyncio.run(self.service.run())
        except BaseException as e:  # reported by problem(), as a crashed Ray actor would be
            self.error = e

    def problem(self) -> str | None:
        if self.thread.is_alive():
            return None
        if self.error is not None:
            return f"coordinator crashed: {self.error!r}"
        assert self.report is not None
        return _verdict(self.report)

    def warnings(self, timeout_s: float = 10.0) -> list[str]:
        self.thread.join(timeout_s)
        return list(self.report.warnings) if self.report is not None else []

    def stop(self) -> None:
        self.service.stop()
        self.thread.join(10.0)


def start_coordinator(where: str, nats_url: str, run_id: str, deployment: Any = None) -> CoordinatorHandle:
    """`where`: "ray" (an actor of `deployment`) or "local" (a thread here)."""
    if where == "local":
        return LocalCoordinator(nats_url, run_id)
    return RayCoordinator(deployment.start_coordinator(run_id))
