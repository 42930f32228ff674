"""The event transport: codec, subjects, the JetStream log client, log files.

The event types live in the core (`accelopt/catalog.py`, re-exported here); `events/`
imports the core and the core never imports `events/`. `events.codec` needs only msgspec;
the NATS client parts (`EventLog`, `NatsServer`) are imported lazily so the pure domain
code never pulls in nats-py.
"""

from __future__ import annotations

from typing import Any

from accelopt.catalog import *  # noqa: F403
from accelopt.catalog import EVENT_TYPES, EVENTS_BY_NAME, VERSION_OF, AnyEvent, Event, derive_event_id
from events.codec import EventDecodeError, decode, encode
from events.subjects import role_filter, run_filter, subject_for

_FROM_LOG = ("EventLog", "WorkQueue", "Delivery", "StreamSettings")
_LAZY = (*_FROM_LOG, "NatsServer", "read_events")  # imported on first use


def __getattr__(name: str) -> Any:
    """The NATS client parts, imported on first use."""
    if name in _FROM_LOG:
        from events import log

        return getattr(log, name)
    if name == "NatsServer":
        from events.server import NatsServer

        return NatsServer
    if name == "read_events":
        from events.logfile import read_events

        return read_events
    raise AttributeError(name)


__all__ = [
    "EVENTS_BY_NAME",
    "EVENT_TYPES",
    "VERSION_OF",
    "AnyEvent",
    "Event",
    "EventDecodeError",
    "decode",
    "derive_event_id",
    "encode",
    "role_filter",
    "run_filter",
    "subject_for",
    *_LAZY,
]
