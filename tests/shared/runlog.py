"""Reading a run's exported log in tests (tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

from accelopt import catalog as c


def last_decision(events: list[c.Event]) -> c.Event:
    """The log's last event but the memory curator's MemoryIndexed: the session waits for the
    run's entries to be indexed before it exports the log, so those may land after the run's
    end (its RunCompleted)."""
    return [e for e in events if not isinstance(e, c.MemoryIndexed)][-1]
