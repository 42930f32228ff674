"""Moving entries in and out of a memory: JSONL export/import and rebuilds from event logs.

JSONL holds one `MemoryEntry` per line (no embeddings: an import re-embeds with the
target memory's model, so it is also how a memory moves to another model). A rebuild
re-projects `MemoryEntryAdded` events from exported run logs (`accelopt export` files; an
agent session's log, its `AgentMemoryEntryAdded` events) or from a live JetStream log, which is
all the table ever is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from accelopt.catalog import AgentMemoryEntryAdded, MemoryEntryAdded
from accelopt.records import MemoryEntry
from events.logfile import read_records
from memory_index.retrieval import Filters
from memory_index.store import MemoryIndex

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(MemoryEntry)
_BATCH = 256
# the subject tokens of the events that add an entry: a run's, and an agent session's (`accelopt mcp`)
_ENTRY_SUBJECTS = tuple(f".{t.subject}" for t in (MemoryEntryAdded, AgentMemoryEntryAdded))


def export_jsonl(index: MemoryIndex, path: str | Path, filters: Filters | None = None) -> int:
    """Write every entry (with kernels) as JSONL, sorted by id; returns the count."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    entries = sorted(index.iter_entries(filters), key=lambda e: e.id)
    tmp = p.with_name(p.name + ".partial")
    with open(tmp, "wb") as fh:
        for e in entries:
            fh.write(_encoder.encode(e))
            fh.write(b"\n")
    tmp.replace(p)
    return len(entries)


def read_jsonl(path: str | Path) -> Iterator[MemoryEntry]:
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield _decoder.decode(line)
            except msgspec.DecodeError as e:
                raise ValueError(f"{path}:{n}: not a memory entry: {e}") from e


def _batched(entries: Iterable[MemoryEntry], size: int = _BATCH) -> Iterator[list[MemoryEntry]]:
    batch: list[MemoryEntry] = []
    for e in entries:
        batch.append(e)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def upsert_all(index: MemoryIndex, entries: Iterable[MemoryEntry], *, skip_existing: bool = True) -> int:
    return sum(index.upsert(b, skip_existing=skip_existing) for b in _batched(entries))


def import_jsonl(index: MemoryIndex, path: str | Path, *, skip_existing: bool = True) -> int:
    """Upsert the entries of a JSONL file; returns how many rows were written."""
    return upsert_all(index, read_jsonl(path), skip_existing=skip_existing)


def entries_from_log(path: str | Path) -> Iterator[MemoryEntry]:
    """The memory entries recorded in one exported run log, in log order."""
    from events.codec import decode

    _, records = read_records(path)
    for seq, (subject, data) in enumerate(records, 1):
        if not subject.endswith(_ENTRY_SUBJECTS):
            continue
        event = decode(data, subject, seq)
        if isinstance(event, (MemoryEntryAdded, AgentMemoryEntryAdded)):
            yield event.entry


def entries_from_logs(paths: Iterable[str | Path]) -> Iterator[MemoryEntry]:
    for p in paths:
        yield from entries_from_log(p)


def rebuild_from_logs(index: MemoryIndex, paths: Iterable[str | Path], *, replace: bool = False) -> int:
    """Project the MemoryEntryAdded events of exported logs into the table.

    `replace`: drop the table first, so it holds exactly what the logs say (do not use on a
    shared memory that other runs' logs also feed). Otherwise an idempotent upsert.
    """
    paths = list(paths)
    for p in paths:  # fail before touching the table when a file is missing or not a log
        read_records(p)
    if replace:
        index.drop()
    return upsert_all(index, entries_from_logs(paths))


async def rebuild_from_nats(
    index: MemoryIndex, nats_url: str, *, run_id: str = "*", replace: bool = False
) -> int:
    """Project the MemoryEntryAdded events of a live JetStream log (every run by default)."""
    import asyncio

    from events.codec import decode
    from events.log import EventLog
    from events.subjects import role_filter

    elog = await EventLog.connect(nats_url, create=False, name="accelopt-memory-rebuild")
    try:
        entries: list[MemoryEntry] = []
        async for msg in elog.iter_raw(role_filter("MemoryEntryAdded", run_id)):
            event = decode(msg.data, msg.subject, msg.metadata.sequence.stream)
            if isinstance(event, MemoryEntryAdded):
                entries.append(event.entry)
    finally:
        await elog.close()
    if replace:
        await asyncio.to_thread(index.drop)
    return await asyncio.to_thread(upsert_all, index, entries)
