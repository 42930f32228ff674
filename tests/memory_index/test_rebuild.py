"""The table is a projection: rebuilding it from an exported log equals the live table."""

from __future__ import annotations

import asyncio

import numpy as np

from accelopt.catalog import MemoryEntryAdded, derive_event_id
from actors.roles.curator import MemoryCurator
from events.log import EventLog
from memory_index import MemoryIndex, rebuild_from_logs


def _snapshot(index: MemoryIndex) -> tuple[list, dict]:
    entries = sorted(index.iter_entries(), key=lambda e: e.id)
    return entries, index.vectors([e.id for e in entries])


def test_rebuild_from_exported_log_equals_live_table(
    nats_server, tmp_path, memory_uri, embedder, corpus, make_entry, to_events
):
    run_id = "run-rebuild"
    entries = [
        *(
            make_entry(
                e.title,
                e.text,
                problem=e.problem,
                op_type=e.op_type,
                device=e.device,
                language=e.language,
                source_run=run_id,
            )
            for e in corpus
        ),
        make_entry("**No optimization found**", "No optimization found", source_run=run_id),
    ]
    replay = MemoryEntryAdded(
        event_id=derive_event_id(run_id, "again", 0), run_id=run_id, ts=0.0, entry=entries[0]
    )
    log_file = tmp_path / "run.alog"

    async def live() -> dict:
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many([*to_events(entries), replay])
        curator = MemoryCurator(nats_server.url, memory_uri, embedder=embedder, batch_window_s=0.01)
        await curator.run(until_idle_s=0.5)
        await curator.close()
        # the entries, the replayed one, and a MemoryIndexed per entry (the replay's is said once)
        assert await elog.export_run(run_id, str(log_file)) == 2 * len(entries) + 1
        await elog.close()
        return curator.summary()

    summary = asyncio.run(live())
    assert summary["handled"] == len(entries) + 1 and summary["written"] == len(entries)

    live_index = MemoryIndex.open(memory_uri, embedder=embedder)
    rebuilt = MemoryIndex.open(tmp_path / "rebuilt", embedder=embedder)
    assert rebuild_from_logs(rebuilt, [log_file]) == len(entries)
    assert rebuild_from_logs(rebuilt, [log_file]) == 0  # idempotent

    live_entries, live_vecs = _snapshot(live_index)
    new_entries, new_vecs = _snapshot(rebuilt)
    assert live_entries == new_entries == sorted(entries, key=lambda e: e.id)
    for i, v in live_vecs.items():
        np.testing.assert_allclose(new_vecs[i], v, atol=1e-5)
    assert rebuilt.stats().noop_rows == live_index.stats().noop_rows == 1

    # --replace drops what the logs do not say.
    rebuilt.upsert([make_entry("**Stray**", "not in the log")])
    assert rebuild_from_logs(rebuilt, [log_file], replace=True) == len(entries)
    assert _snapshot(rebuilt)[0] == live_entries
