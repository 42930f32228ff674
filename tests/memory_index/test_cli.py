"""`accelopt memory stats|list|search|show|export|import|rebuild|index` on a real memory."""

from __future__ import annotations

import asyncio
import json

from cli.main import main
from events.codec import encode
from events.log import EventLog
from events.logfile import LogWriter
from events.subjects import subject_for
from memory_index import MemoryIndex


def _cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["memory", *argv])
    return rc, capsys.readouterr().out


def test_cli_round_trip(capsys, tmp_path, memory, memory_uri, corpus, make_entry, to_events, nats_server):
    memory.upsert(corpus)
    u = ("--uri", memory_uri)

    rc, out = _cli(capsys, "stats", *u, "--json")
    stats = json.loads(out)
    assert rc == 0 and stats["rows"] == len(corpus) and stats["by_device"]["cpu"] == 4

    rc, out = _cli(capsys, "list", *u, "--device", "trn1", "--json")
    assert rc == 0 and {json.loads(line)["device"] for line in out.splitlines()} == {"trn1"}
    assert "slow" in json.loads(out.splitlines()[0])["slow_kernel"]
    rc, out = _cli(capsys, "list", *u, "--limit", "3")
    assert rc == 0 and "3 of 8 entries" in out

    rc, out = _cli(capsys, "search", *u, "parallel prefix sum", "--top-m", "2", "--json")
    hits = json.loads(out)
    assert rc == 0 and len(hits) == 2 and hits[0]["problem"] == "cumsum"
    rc, out = _cli(capsys, "search", *u, "parallel prefix sum", "--top-m", "2")  # the table
    assert rc == 0 and "top 2 for 'parallel prefix sum'" in out and "cumsum" in out and "score" in out
    rc, out = _cli(capsys, "search", *u, "prefix sum", "--top-m", "1", "--prompt")
    assert out.startswith("# Experiences") and "device cpu, language c" in out

    rc, out = _cli(capsys, "show", *u, hits[0]["entry_id"], "--json")
    assert rc == 0 and json.loads(out)["id"] == hits[0]["entry_id"]
    assert _cli(capsys, "show", *u, "no-such-id")[0] == 1
    assert _cli(capsys, "show", *u, "run-corpus")[0] == 1  # ambiguous prefix
    extra = make_entry("**Unique**", "one of a kind", id="0123456789abcdef")
    memory.upsert([extra])
    rc, out = _cli(capsys, "show", *u, "0123456789")  # `list` shows 12-character ids
    assert rc == 0 and "one of a kind" in out and "fast kernel" in out
    memory.delete([extra.id])

    jsonl = tmp_path / "m.jsonl"
    assert _cli(capsys, "export", *u, str(jsonl), "--language", "c")[0] == 0
    other = str(tmp_path / "other")
    rc, out = _cli(capsys, "import", "--uri", other, str(jsonl))
    assert rc == 0 and "imported 4 new entries" in out

    # rebuild from an exported log file, then from the live JetStream log
    log = tmp_path / "run.alog"
    events = to_events(corpus[:5])
    with LogWriter(log, "run-corpus") as w:
        for e in events:
            w.write(subject_for(e), encode(e))
    rebuilt = str(tmp_path / "rebuilt")
    rc, out = _cli(capsys, "rebuild", "--uri", rebuilt, str(log))
    assert rc == 0 and "5 entries written" in out

    async def publish() -> None:
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many(to_events(corpus))
        await elog.close()

    asyncio.run(publish())
    rc, out = _cli(capsys, "rebuild", "--uri", rebuilt, "--nats", nats_server.url)
    assert rc == 0 and "3 entries written; the table holds 8" in out
    assert _cli(capsys, "rebuild", "--uri", rebuilt)[0] == 2

    rc, out = _cli(capsys, "index", *u)
    assert rc == 0 and json.loads(out)["vector_index"] is False  # too small for an ANN index
    assert MemoryIndex.open(memory_uri).count() == len(corpus)


def test_without_uri_the_memory_written_last_under_the_root(capsys, tmp_path, embedder, corpus, monkeypatch):
    """After `make demo` (a fresh `runs/demo-memory-<time>`), `accelopt memory search` with no
    flag searches the demo's memory; after a later run writes `runs/memory`, that one; reading
    a root with no memory says so and creates nothing."""
    import os

    monkeypatch.delenv("ACCELOPT_MEMORY", raising=False)
    root = tmp_path / "runs"
    assert _cli(capsys, "search", "prefix sum", "--root", str(root))[0] == 1
    assert _cli(capsys, "stats", "--root", str(root))[0] == 0
    assert not root.exists(), "reading created the memory"
    demo = root / "demo-memory-20261126-035946"
    MemoryIndex.open(str(demo), embedder=embedder).upsert(corpus[:3])
    capsys.readouterr()
    rc = main(["memory", "search", "prefix sum", "--root", str(root), "--json"])
    out = capsys.readouterr()
    assert rc == 0 and {h["entry_id"] for h in json.loads(out.out)} <= {e.id for e in corpus[:3]}
    assert f"memory {demo}: the one under {root}/ written last" in out.err
    shared = root / "memory"
    MemoryIndex.open(str(shared), embedder=embedder).upsert(corpus[3:])
    later = (demo / "memory.lance" / "_versions").stat().st_mtime + 5
    os.utime(shared / "memory.lance" / "_versions", (later, later))
    rc, out = _cli(capsys, "list", "--root", str(root), "--json")
    assert rc == 0 and {json.loads(line)["id"] for line in out.splitlines()} == {e.id for e in corpus[3:]}
    # --uri, then $ACCELOPT_MEMORY, come first
    rc, out = _cli(capsys, "list", "--root", str(root), "--uri", str(demo), "--json")
    assert {json.loads(line)["id"] for line in out.splitlines()} == {e.id for e in corpus[:3]}
    monkeypatch.setenv("ACCELOPT_MEMORY", str(demo))
    rc, out = _cli(capsys, "list", "--root", str(root), "--json")
    assert {json.loads(line)["id"] for line in out.splitlines()} == {e.id for e in corpus[:3]}
