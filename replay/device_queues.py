"""The device queues of a runs root as others read them: the records the MCP servers of the
root write (`<root>/.device_queue.<server>.json`, `accelopt.device_queue.QueueRecord`), one
line each for `accelopt campaign status` and the dashboard. A record whose server process is
gone is skipped (it was killed before it could remove it)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from accelopt.device_queue import QUEUE_GLOB, QueueRecord
from events.runsource import process_alive


def read_queues(root: str | Path) -> list[QueueRecord]:
    """The live servers' queue records under `root`, oldest server first."""
    out = []
    for path in sorted(Path(root).glob(QUEUE_GLOB)):
        try:
            record = msgspec.json.decode(path.read_bytes(), type=QueueRecord)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue  # being replaced, or not ours: the next read sees it whole
        if process_alive(record.pid):
            out.append(record)
    return out


def queue_line(record: QueueRecord) -> str:
    """One server's queue in a line: each device (who profiles it, running, waiting), then each
    session's device-seconds (of its budget), what it has running and waiting, its refusals."""
    st = record.state
    devices = []
    for d in st.devices:
        who = record.backends.get(d.device, "")
        running = "running " + ", ".join(d.running) if d.running else "idle"
        devices.append(f"{d.device}: {running}, {d.waiting} waiting" + (f" ({who})" if who else ""))
    budget = f" of {st.limits.device_s:g}" if st.limits.device_s is not None else ""
    sessions = []
    for s in st.sessions:
        extra = [
            f"{n} {what}"
            for n, what in ((s.running, "running"), (s.waiting, "waiting"), (s.refused, "refused"))
            if n
        ]
        sessions.append(
            f"{s.session} {s.device_s:.1f}{budget} s" + (f" ({', '.join(extra)})" if extra else "")
        )
    limit = f", at most {st.limits.max_in_flight} at once each" if st.limits.max_in_flight is not None else ""
    return (
        f"device queue of mcp {record.server}: "
        + ("; ".join(devices) or "no profiles yet")
        + (f" · sessions{limit}: " + "; ".join(sessions) if sessions else "")
    )


def queue_lines(root: str | Path) -> list[str]:
    return [queue_line(r) for r in read_queues(root)]


def queues_version(root: str | Path) -> tuple[tuple[str, int], ...]:
    """What the lines are read from, cheaply (each record's name and mtime): a reader that
    caches them reads again when this changes."""
    out = []
    for path in sorted(Path(root).glob(QUEUE_GLOB)):
        try:
            out.append((path.name, path.stat().st_mtime_ns))
        except OSError:
            continue
    return tuple(out)
