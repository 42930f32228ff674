"""Which runs start the memory workers (curator and retriever: the embedding model and the
index): a run whose settings never retrieve does not, resumed or not; an ablation whose
parent's settings (in force before its fork) retrieve does. A resumed memory-off run used
to start them and index every insight on the stream."""

from __future__ import annotations

import msgspec

from accelopt import catalog as ev
from accelopt.config import recorded_config
from actors.runtime.session import needs_memory
from replay.synthetic import synthetic_run


def started(memory: bool, parent_memory: bool | None = None) -> ev.RunStarted:
    first = synthetic_run(run_id="r", problems=1, max_events=1)[0]
    assert isinstance(first, ev.RunStarted)
    config = {**first.config, "memory": {**first.config["memory"], "enabled": memory}}
    fork = (
        None
        if parent_memory is None
        else {**config, "memory": {**config["memory"], "enabled": parent_memory}}
    )
    return msgspec.structs.replace(
        first,
        config=config,
        fork_config=fork,
        parent_run="p" if fork else None,
        fork_iteration=1 if fork else None,
    )


def test_a_memory_off_run_needs_no_memory_workers():
    e = started(memory=False)
    assert needs_memory(recorded_config(e.config), e) is False


def test_a_memory_on_run_needs_them():
    e = started(memory=True)
    assert needs_memory(recorded_config(e.config), e) is True


def test_an_ablation_needs_them_when_its_parent_retrieved_before_the_fork():
    assert (
        needs_memory(recorded_config(started(False, parent_memory=True).config), started(False, True)) is True
    )
    assert (
        needs_memory(recorded_config(started(False, parent_memory=False).config), started(False, False))
        is False
    )


def test_without_the_recorded_start_they_start():
    assert needs_memory(recorded_config(started(memory=False).config), None) is True
