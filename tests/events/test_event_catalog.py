"""An event type is declared once, in the catalog (its fields, subject token and author);
the subjects, the readers' dispatch tables and `replay --verify`'s decision set are derived
from it. These tests guard the derivations: a handler whose name matches no event type (a
typo would silently drop the events it was meant for), a subject token used twice, a type
missing from the union the log is decoded with."""

from __future__ import annotations

import inspect
import re
import typing

import msgspec
import pytest

from accelopt import catalog as ev
from accelopt.campaign_core import CampaignCore
from accelopt.coordinator import CoordinatorCore
from events.codec import decode, encode
from events.subjects import TOKENS, role_filter, subject_for
from replay.fold import RunView
from replay.verify import DECISION_TYPES


def _event_subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        if sub.__module__ == ev.__name__:
            out |= {sub} | _event_subclasses(sub)
    return out


def test_every_event_type_of_the_catalog_is_in_the_union_the_log_is_decoded_with() -> None:
    assert set(ev.EVENT_TYPES) == _event_subclasses(ev.Event)  # a subclass of a subclass too
    assert typing.get_args(ev.AnyEvent) == ev.EVENT_TYPES
    assert len(ev.EVENT_TYPES) == 35
    e = ev.MemoryIndexed(event_id="x", run_id="r1", ts=1.0, entry_id="m")
    assert decode(encode(e)) == e


def test_every_event_type_declares_its_subject_and_author_and_no_two_share_a_subject() -> None:
    subjects = [t.subject for t in ev.EVENT_TYPES]
    assert len(set(subjects)) == len(subjects)
    assert all(t.author in ev.Author.__args__ for t in ev.EVENT_TYPES)  # type: ignore[attr-defined]
    assert {t.__name__: t.subject for t in ev.EVENT_TYPES} == TOKENS
    # a class variable, not a field: it is never on the wire
    assert "subject" not in msgspec.structs.fields(ev.KernelProfiled).__repr__()
    e = ev.IterationStarted(event_id="x", run_id="r1", ts=0.0, problem="p", iteration=0, beam=[])
    assert subject_for(e) == "accelopt.r1.iteration.started"
    assert b"subject" not in msgspec.json.encode(e)
    assert role_filter("ProfileRequested", device="h100") == "accelopt.*.profile.requested.h100"


def test_verify_re_derives_exactly_what_the_coordinator_authors() -> None:
    assert {t for t in ev.EVENT_TYPES if t.author == "coordinator"} == DECISION_TYPES
    assert {t.__name__ for t in DECISION_TYPES} == {
        "IterationStarted",
        "PlanRequested",
        "ImplementationRequested",
        "ProfileRequested",
        "FixRequested",
        "BeamSelected",
        "SummaryRequested",
        "MemoryEntryAdded",
        "IterationCompleted",
        "RunCompleted",
        "BudgetExceeded",
        "ProblemRemeasured",
    }


def test_a_campaign_s_scheduler_decisions_are_its_own_set() -> None:
    assert {t.__name__ for t in ev.CAMPAIGN_DECISION_TYPES} == {
        "CampaignRunScheduled",
        "CampaignBudgetSpent",
        "CampaignDeviceParked",
        "CampaignPaused",
        "CampaignStopped",
    }
    assert not ev.CAMPAIGN_DECISION_TYPES & DECISION_TYPES
    assert {t.__name__ for t in ev.CAMPAIGN_TYPES - ev.CAMPAIGN_DECISION_TYPES} == {
        "CampaignStarted",
        "CampaignResumed",
        "CampaignTicked",
        "CampaignRunFinished",
        "CampaignItemMeasured",
    }


def _snake_name(event_type: type) -> str:
    """KernelProfiled -> kernel_profiled; LLMCallCompleted -> llm_call_completed."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", event_type.__name__).lower()


def _tables() -> list[tuple[object, dict[type[ev.Event], object]]]:
    """(reader, its dispatch table) of every event reader with one."""
    core, view, campaign = CoordinatorCore("r1"), RunView(), CampaignCore("c1")
    return [(core, core._handlers), (view, view._dispatch), (campaign, campaign._handlers)]


# the deciders the coordinator core composes, whose `on_<type>` methods are rows of its table
COMPOSED = {CoordinatorCore: ("loop", "kernel_flow")}


def _handlers(reader: object) -> dict[str, object]:
    """name -> bound handler of every handler a reader defines: its own `_on_<type>` methods
    and the `on_<type>` ones of the deciders it composes."""
    out = {
        name: getattr(reader, name)
        for name, _ in inspect.getmembers(type(reader), inspect.isfunction)
        if name.startswith("_on_")
    }
    for part in COMPOSED.get(type(reader), ()):
        decider = getattr(reader, part)
        out |= {
            name: getattr(decider, name)
            for name, _ in inspect.getmembers(type(decider), inspect.isfunction)
            if name.startswith("on_")
        }
    return out


@pytest.mark.parametrize("reader", [CoordinatorCore, RunView, CampaignCore])
def test_every_handler_of_a_reader_is_named_for_an_event_type(reader: type) -> None:
    named = {prefix + _snake_name(t) for t in ev.EVENT_TYPES for prefix in ("_on_", "on_")}
    instance = next(r for r, _ in _tables() if type(r) is reader)
    handlers = set(_handlers(instance))
    assert handlers - named <= {"_on_request"}, handlers - named
    assert len(handlers & named) >= (4 if reader is CampaignCore else 11)


def test_the_dispatch_tables_are_the_handlers() -> None:
    view = RunView()
    assert view._dispatch[ev.KernelProfiled] == view._on_kernel_profiled
    assert view._dispatch[ev.PlanRequested] == view._on_request
    assert ev.ProblemRemeasured in view._dispatch and ev.MemoryIndexed not in view._dispatch
    # each row names its handler: a handler written but left out of its table (the typo of
    # the naming rule the tables replace) is found here, as is a row of the wrong handler
    for reader, table in _tables():
        assert set(table.values()) == set(_handlers(reader).values()), type(reader).__name__
        for t, handler in table.items():
            names = ("_on_" + _snake_name(t), "on_" + _snake_name(t), "_on_request")
            assert handler.__name__ in names, (t, handler)  # type: ignore[attr-defined]


def test_a_dispatch_table_refuses_a_type_twice() -> None:
    def first(e: ev.KernelProfiled) -> None: ...

    def second(e: ev.KernelProfiled) -> None: ...

    assert ev.dispatch_table(ev.on(ev.KernelProfiled, first)) == {ev.KernelProfiled: first}
    with pytest.raises(ValueError, match="KernelProfiled has two handlers"):
        ev.dispatch_table(ev.on(ev.KernelProfiled, first), ev.on(ev.KernelProfiled, second))


@pytest.mark.parametrize(
    ("reader", "apart"),
    [
        # the core's `_handle` takes RunStarted and the requests apart
        (CoordinatorCore, {ev.RunStarted, ev.ProfileRequested, *ev.ROLE_OF_REQUEST}),
        (RunView, set()),
    ],
)
def test_every_type_of_a_run_s_log_is_handled_or_declared_ignored(reader: type, apart: set) -> None:
    """A new event type on a run's log must be handled by each reader or named as one it
    ignores: it never passes a reader by accident."""
    table = next(t for r, t in _tables() if type(r) is reader)
    handled = set(table)
    assert not (handled & reader.IGNORED) and not (handled & apart) and not (apart & reader.IGNORED)
    assert handled | apart | reader.IGNORED == ev.RUN_TYPES, ev.RUN_TYPES - (handled | apart | reader.IGNORED)


def test_the_campaign_core_reads_every_input_of_a_campaign_s_log() -> None:
    table = CampaignCore("c1")._handlers
    assert set(table) == ev.CAMPAIGN_TYPES - ev.CAMPAIGN_DECISION_TYPES


def test_snake_names() -> None:
    assert _snake_name(ev.LLMCallCompleted) == "llm_call_completed"
    assert _snake_name(ev.KernelProfiled) == "kernel_profiled"


def test_the_envelope_builder_derives_the_id_and_names_the_cause() -> None:
    cause = ev.MemoryIndexed(**ev.envelope(ev.MemoryIndexed, "r1", "m", ts=1.0), entry_id="m")
    assert cause.event_id == ev.derive_event_id("r1", "MemoryIndexed", "m") and cause.causation_id is None
    env = ev.envelope(ev.KernelProfiled, "r1", "k", ts=2.0, cause=cause)
    assert env == {
        "event_id": ev.derive_event_id("r1", "KernelProfiled", "k"),
        "run_id": "r1",
        "ts": 2.0,
        "causation_id": cause.event_id,
    }
    assert ev.envelope(ev.KernelProfiled, "r1", ts=0.0, cause="req-1", event_id="fixed") == {
        "event_id": "fixed",
        "run_id": "r1",
        "ts": 0.0,
        "causation_id": "req-1",
    }
