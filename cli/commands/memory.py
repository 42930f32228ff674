"""`accelopt memory ...`: inspect and maintain the optimization memory (a LanceDB table).

    accelopt memory stats | list | search TEXT | show ID | export FILE | import FILE
    accelopt memory rebuild LOG... [--replace] | rebuild --nats URL
    accelopt memory index            (vector + id indices, compaction; for large memories)

The memory is `--uri` (a folder or `s3://bucket/prefix`), else `$ACCELOPT_MEMORY`, else the
memory under `--root` (default runs) that was written last: `runs/memory`, which every
`accelopt run` of that root shares, or the fresh one of the last `accelopt demo`
(`runs/demo-memory-<time>`); the command says which it opened. Reading a memory that does
not exist creates nothing. Heavy imports (LanceDB, sentence-transformers) happen only when a
command runs, so `accelopt --help` stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cli.console import columns_table


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--uri",
        default=None,
        help="memory location: folder or s3://bucket/prefix (default: "
        "$ACCELOPT_MEMORY, else the memory under --root written last: runs/memory or the last demo's)",
    )
    p.add_argument(
        "--root", default="runs", help="runs directory whose memories are the default (default ./runs)"
    )
    p.add_argument("--table", default="memory", help="table name (default: memory)")
    p.add_argument(
        "--model", default=None, help="embedding model (default: the one the table was built with)"
    )


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", action="append", help="only this device kind (repeatable)")
    p.add_argument("--language", action="append", help="only this kernel language (repeatable)")
    p.add_argument("--op-type", action="append", help="only this op type (repeatable)")
    p.add_argument("--min-speedup", type=float, default=None, help="only entries at least this fast")


def register(sub: argparse._SubParsersAction) -> None:
    mem = sub.add_parser(
        "memory",
        help="inspect and maintain the optimization memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    msub = mem.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")
    mem.set_defaults(func=lambda args: (mem.print_help(), 2)[1])

    p = msub.add_parser("stats", help="row counts by device, language and op type; model; indices")
    _common(p)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=_stats)

    p = msub.add_parser("list", help="entries, newest first")
    _common(p)
    _filters(p)
    p.add_argument("--problem", action="append", help="only this problem (repeatable)")
    p.add_argument("--limit", type=int, default=20, help="at most this many entries (default 20)")
    p.add_argument("--json", action="store_true", help="JSON lines of full entries (with kernels)")
    p.set_defaults(func=_list)

    p = msub.add_parser("search", help="the entries most similar to TEXT (what a planner would see)")
    _common(p)
    _filters(p)
    p.add_argument("text", help="what to look for, e.g. a plan or an optimization idea")
    p.add_argument(
        "--top-m", type=int, default=16, help="at most this many entries (default 16, as a planner gets)"
    )
    p.add_argument("--exclude-problem", default=None, help="leave out this problem's own entries")
    p.add_argument("--no-collapse", action="store_true", help="keep near-duplicate insights")
    p.add_argument("--prompt", action="store_true", help="print the planner's memory block instead")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=_search)

    p = msub.add_parser("show", help="one entry in full, with its slow and fast kernels")
    _common(p)
    p.add_argument("id", help="entry id, or a unique prefix of one (as `list` shows them)")
    p.add_argument("--json", action="store_true", help="print the entry as JSON")
    p.set_defaults(func=_show)

    p = msub.add_parser("export", help="write the entries to a JSONL file (no embeddings)")
    _common(p)
    _filters(p)
    p.add_argument("file", help="JSONL file to write")
    p.set_defaults(func=_export)

    p = msub.add_parser("import", help="upsert the entries of a JSONL file (re-embedded)")
    _common(p)
    p.add_argument("file", help="JSONL file of entries (as `export` writes)")
    p.set_defaults(func=_import)

    p = msub.add_parser("rebuild", help="re-project MemoryEntryAdded events from exported logs or a live log")
    _common(p)
    p.add_argument(
        "logs",
        nargs="*",
        metavar="LOG",
        help="exported run logs (the log.aolog of a run folder, written at the end of every run)",
    )
    p.add_argument("--nats", default=None, help="read every run's entries from this JetStream log instead")
    p.add_argument("--run", default="*", help="with --nats: only this run")
    p.add_argument(
        "--replace",
        action="store_true",
        help="drop the table first (only when these logs are all that feeds this memory)",
    )
    p.set_defaults(func=_rebuild)

    p = msub.add_parser("index", help="build the vector index (ANN) and the id index; compact")
    _common(p)
    p.add_argument("--type", default="IVF_HNSW_SQ", help="IVF_HNSW_SQ (default), IVF_PQ, IVF_FLAT, ...")
    p.add_argument("--min-rows", type=int, default=None, help="skip the ANN index below this many rows")
    p.set_defaults(func=_index)


# --- helpers -------------------------------------------------------------------------------------


def memory_uri(args: argparse.Namespace) -> str:
    """The memory a command works on (see the module doc); says which where it was not given."""
    from memory_index.store import ENV_URI, default_uri

    if args.uri:
        return args.uri
    env_uri = os.environ.get(ENV_URI)
    if env_uri:
        return env_uri
    root = Path(args.root)
    written = [
        (_last_write(d / f"{args.table}.lance"), d) for d in [root / "memory", *root.glob("demo-memory-*")]
    ]
    written = [(t, d) for t, d in written if t is not None]
    if not written:
        return default_uri(root)
    _, chosen = max(written)
    if len(written) > 1 or chosen != root / "memory":
        others = len(written) - 1
        print(
            f"memory {chosen}: the one under {root}/ written last"
            + (f" (of {others + 1}; --uri to pick another)" if others else " (--uri to pick another)"),
            file=sys.stderr,
        )
    return str(chosen)


def _last_write(table_dir: Path) -> float | None:
    """When a LanceDB table folder was last committed to (each commit adds a manifest under
    `_versions`), or None if there is no table there."""
    versions = table_dir / "_versions"
    try:
        return versions.stat().st_mtime if versions.is_dir() else None
    except OSError:
        return None


def _missing(uri: str) -> bool:
    """A local memory folder that does not exist (read commands say so and create nothing)."""
    return "://" not in uri and not Path(uri).expanduser().exists()


def _open(args: argparse.Namespace, uri: str | None = None) -> Any:
    from memory_index import MemoryIndex

    return MemoryIndex.open(uri or memory_uri(args), embedder=args.model, table=args.table)


def _open_existing(args: argparse.Namespace) -> Any | None:
    """The memory to read, or None (after saying so) when there is none: opening would create it."""
    uri = memory_uri(args)
    if _missing(uri):
        print(
            f"no memory at {uri}: a run creates it with its first insight (--uri to read another)",
            file=sys.stderr,
        )
        return None
    return _open(args, uri)


def _filter_obj(args: argparse.Namespace, **extra: Any) -> Any:
    from memory_index import Filters

    return Filters(
        device=args.device,
        language=args.language,
        op_type=args.op_type,
        min_speedup=args.min_speedup,
        include_noop=True,
        **extra,
    )


def _out(obj: Any) -> None:
    import msgspec

    sys.stdout.write(msgspec.json.encode(obj).decode() + "\n")


def _short(text: str, n: int = 70) -> str:
    line = " ".join(text.strip().strip("*").split())
    return line if len(line) <= n else line[: n - 1] + "…"


# --- commands ------------------------------------------------------------------------------------


def _stats(args: argparse.Namespace) -> int:
    uri = memory_uri(args)
    if _missing(uri):  # nothing to count, and nothing to create
        if args.json:
            _out({"uri": uri, "table": args.table, "exists": False, "rows": 0})
        else:
            Console().print(f"no memory at {uri} (a run creates it with its first insight)", highlight=False)
        return 0
    s = _open(args, uri).stats()
    if args.json:
        _out(s)
        return 0
    con = Console()
    if not s.exists:
        con.print(f"no memory table [bold]{s.table}[/] at {s.uri} (it is created on the first write)")
        return 0
    t = Table(title=f"memory {s.uri} (table {s.table})", show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    for k, v in (
        ("entries", s.rows),
        ("no-op entries (never retrieved)", s.noop_rows),
        ("runs", s.runs),
        ("problems", s.problems),
        ("embedding model", f"{s.model} ({s.dim}-dim)"),
        ("table version", s.version),
        ("fragments", s.fragments),
        ("indices", ", ".join(s.indices) or "none (flat search)"),
    ):
        t.add_row(k, str(v))
    con.print(t)
    for title, counts in (("device", s.by_device), ("language", s.by_language), ("op type", s.by_op_type)):
        ct = Table(title=f"by {title}")
        ct.add_column(title)
        ct.add_column("entries", justify="right")
        for k, n in list(counts.items())[:20]:
            ct.add_row(k, str(n))
        con.print(ct)
    return 0


def _list(args: argparse.Namespace) -> int:
    index = _open_existing(args)
    if index is None:
        return 1
    entries = index.list(_filter_obj(args, problem=args.problem), limit=args.limit, kernels=args.json)
    if args.json:
        for e in entries:
            _out(e)
        return 0
    _print_table(
        f"{len(entries)} of {index.count()} entries, newest first",
        ("id", "problem", "op type", "device", "lang", "speedup", "title"),
        [
            (e.id[:12], e.problem, e.op_type, e.device, e.language, f"{e.speedup:.2f}x", _short(e.title))
            for e in entries
        ],
    )
    return 0


def _print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A table of entries, their figures (score, speedup) right-justified."""
    t = columns_table(title, columns, right=("score", "speedup"))
    for row in rows:
        t.add_row(*row)
    Console().print(t)


def _search(args: argparse.Namespace) -> int:
    from memory_index import SearchQuery, format_for_prompt

    index = _open_existing(args)
    if index is None:
        return 1
    results = index.search(
        args.text,
        SearchQuery(
            top_m=args.top_m,
            device=args.device,
            language=args.language,
            op_type=args.op_type,
            min_speedup=args.min_speedup,
            exclude_problem=args.exclude_problem,
            collapse=not args.no_collapse,
        ),
    )
    if args.prompt:
        sys.stdout.write(format_for_prompt(results))
        return 0
    if args.json:
        _out(results)
        return 0
    _print_table(
        f"top {len(results)} for {_short(args.text, 50)!r}",
        ("score", "id", "problem", "device", "lang", "speedup", "title"),
        [
            (
                f"{r.score:.3f}",
                r.entry_id[:12],
                r.problem,
                r.device,
                r.language,
                f"{r.speedup:.2f}x",
                _short(r.title),
            )
            for r in results
        ],
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    index = _open_existing(args)
    if index is None:
        return 1
    entry = index.get(args.id)
    if entry is None:  # accept a unique prefix, as `list` shows shortened ids
        matches = [e for e in index.list(limit=None) if e.id.startswith(args.id)]
        if len(matches) == 1:
            entry = index.get(matches[0].id)
        else:
            print(
                f"no entry {args.id!r}" + (f" ({len(matches)} ids start with it)" if matches else ""),
                file=sys.stderr,
            )
            return 1
    if args.json:
        _out(entry)
        return 0
    con = Console()
    con.print(f"[bold]{entry.title.strip().strip('*')}[/]")
    con.print(
        f"id {entry.id}  run {entry.source_run}  problem {entry.problem} ({entry.op_type})  "
        f"{entry.device}/{entry.language}  {entry.speedup:.2f}x  positive={entry.positive}"
    )
    con.print()
    con.print(entry.text, markup=False, highlight=False)
    for name, src in (("slow kernel", entry.slow_kernel), ("fast kernel", entry.fast_kernel)):
        con.rule(name)
        con.print(src, markup=False, highlight=False)
    return 0


def _export(args: argparse.Namespace) -> int:
    from memory_index import export_jsonl

    index = _open_existing(args)
    if index is None:
        return 1
    n = export_jsonl(index, args.file, _filter_obj(args))
    print(f"exported {n} entries to {args.file}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from memory_index import import_jsonl

    n = import_jsonl(_open(args), args.file)
    print(f"imported {n} new entries from {args.file}")
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    from memory_index import rebuild_from_logs, rebuild_from_nats

    if bool(args.logs) == bool(args.nats):
        print("give exported LOG files or --nats URL (one of them)", file=sys.stderr)
        return 2
    index = _open(args)
    if args.nats:
        n = asyncio.run(rebuild_from_nats(index, args.nats, run_id=args.run, replace=args.replace))
    else:
        n = rebuild_from_logs(index, args.logs, replace=args.replace)
    print(f"rebuilt: {n} entries written; the table holds {index.count()}")
    return 0


def _index(args: argparse.Namespace) -> int:
    index = _open(args)
    kwargs: dict[str, Any] = {"index_type": args.type}
    if args.min_rows is not None:
        kwargs["min_rows"] = args.min_rows
    built = index.create_vector_index(**kwargs)
    index.optimize()
    print(json.dumps({"vector_index": built, "rows": index.count(), "indices": index.stats().indices}))
    return 0
