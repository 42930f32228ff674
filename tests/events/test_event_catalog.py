"""An event type is declared once, in the catalog (its fields, subject token and author);
the subjects, the readers' dispatch tables and `replay --verify`'s decision set are derived
from it. These tests guard the derivations: a handler whose name matches no event type (a
typo would silently drop the events it was meant for), a subject token used twice, a type
missing from the union the log is decoded with."""

from __future__ import annotations

import inspect
import typing

import msgspec
import pytest

from accelopt import catalog as ev
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
    assert len(ev.EVENT_TYPES) == 32
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
    }


@pytest.mark.parametrize("reader", [CoordinatorCore, RunView])
def test_every_handler_of_a_reader_is_named_for_an_event_type(reader: type) -> None:
    named = {"_on_" + ev.snake_name(t) for t in ev.EVENT_TYPES}
    handlers = {name for name, _ in inspect.getmembers(reader, inspect.isfunction) if name.startswith("_on_")}
    assert handlers - named <= {"_on_request"}, handlers - named
    assert len(handlers & named) >= 11


def test_the_dispatch_tables_are_the_handlers() -> None:
    view = RunView()
    assert view._dispatch[ev.KernelProfiled] == view._on_kernel_profiled
    assert view._dispatch[ev.PlanRequested] == view._on_request
    assert ev.ProblemRemeasured in view._dispatch and ev.MemoryIndexed not in view._dispatch

    class Reader:
        def _on_kernel_profiled(self, e: ev.KernelProfiled) -> None: ...

        def _on_kernel_profield(self, e: ev.KernelProfiled) -> None: ...  # a typo is no handler

    assert list(ev.handlers(Reader())) == [ev.KernelProfiled]


def test_snake_names() -> None:
    assert ev.snake_name(ev.LLMCallCompleted) == "llm_call_completed"
    assert ev.snake_name(ev.KernelProfiled) == "kernel_profiled"
