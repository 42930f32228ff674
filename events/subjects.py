"""Subject naming on the one JetStream stream.

`accelopt.<run_id>.<token>` per event type; profile requests also carry the device kind,
`accelopt.<run_id>.profile.requested.<device>`, so a fleet's profilers consume only their
own. Role filters use `*` for the run so one pool of agents serves every run.
"""

from __future__ import annotations

import re

from accelopt.catalog import EVENT_TYPES, Event, ProfileRequested

STREAM = "ACCELOPT"
PREFIX = "accelopt"

# event type name -> its subject token (declared with the type: `Event.subject`)
TOKENS: dict[str, str] = {t.__name__: t.subject for t in EVENT_TYPES}

_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DEVICE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r}: use letters, digits, '-' and '_' (at most 128)")
    return run_id


def subject_for(event: Event) -> str:
    token = TOKENS[type(event).__name__]
    subject = f"{PREFIX}.{event.run_id}.{token}"
    if isinstance(event, ProfileRequested):
        if not _DEVICE.match(event.device):
            raise ValueError(f"device kind {event.device!r} is not a valid subject token")
        subject += f".{event.device}"
    return subject


def run_filter(run_id: str) -> str:
    """Every event of one run."""
    return f"{PREFIX}.{check_run_id(run_id)}.>"


def role_filter(event_type: str, run_id: str = "*", device: str | None = None) -> str:
    """Work subjects of one role, across all runs by default (e.g. planner: PlanRequested)."""
    subject = f"{PREFIX}.{run_id}.{TOKENS[event_type]}"
    if event_type == "ProfileRequested":
        subject += f".{device or '*'}"
    return subject


ALL_EVENTS = f"{PREFIX}.>"
