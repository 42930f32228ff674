"""`accelopt mcp` against the in-process path, in parts (`--parts`, default all):

- `latency`: list_problems / get_problem / search_memory latency over the real client (stdio;
  the memory seeded with the cpu_v2 baselines' tunable moves, written through
  MemoryIndex.upsert), search by a new text, a kernel the server never saw (the query a run's
  planner makes), the baseline get_problem showed, and a kernel right after profile_kernel
  judged it (the last two embedded ahead by the server; each search's `query_embedding` is
  counted), and the first search after the server started (it waits for the server's warm-up
  where that is not done);
- `breakdown`: where a search's time goes, in this process on the same memory: the query's
  embedding (a text, a kernel's query) on 1 and on 2 torch threads, interleaved, the vector
  search, and a search's hits' provenance read in one query against one query per hit; wall
  milliseconds (median), and the CPU time they took (`cpu_ms`: the work, where the wall time
  adds the waits of a loaded host);
- `profile`: a warm profile through the MCP tool against the same kernel profiled by the
  hardware agent in this process (what a run's profiler calls), interleaved;
- `sessions`: 8 HTTP sessions profiling at once: every verdict in the session log exactly once;
- `pool`: with a warm pool of `accelopt up` on the server's root (the device queue sends the
  server's profiles to the pool's profiler), a warm profile through the MCP tool against the
  same kernel's `ProfileRequested` sent to the pool by this process as a run's coordinator
  sends it (a run of its own on the pool's log, waiting for its `KernelProfiled`), interleaved.

    .venv/bin/python benchmarks/mcp_bench.py [--parts latency,breakdown,profile,sessions,pool]
        [--rounds 5] [--calls 30] [--sessions 8]

Results: benchmarks/results/mcp_bench.json; a run of some parts keeps the figures of the
others from the file, under `not_rerun` with the commit and date they were measured at.
Figures are wall seconds of one machine; on a loaded host they move with the load (its load
average is recorded, and this process's nice value).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "shared"))

from benchmarks._common import median, percentile, save  # noqa: E402

SILU_REF = "cpu_v2/silu"
# what a search asks: a new text; a kernel the server never saw; the baseline get_problem showed
# (its query embedded ahead); a kernel searched right after profile_kernel judged it
QUERY_KINDS = ("text", "kernel", "baseline", "kernel_after_profile")


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _seed_memory(uri: Path) -> int:
    import suites
    from accelopt.records import MemoryEntry
    from memory_index import MemoryIndex

    entries = []
    for p in suites.load_suite("cpu_v2"):
        src = p.baseline.entry_file().content
        for i, (a, b) in enumerate(
            [("#define UNROLL 1", "#define UNROLL 4"), ("#define VEC 4", "#define VEC 8")]
        ):
            if a in src:
                entries.append(
                    MemoryEntry(
                        id=f"bench-{p.name}-{i}",
                        source_run="mcp-bench",
                        problem=p.name,
                        op_type=p.definition.op_type,
                        device="cpu",
                        language="c",
                        slow_kernel=src,
                        fast_kernel=src.replace(a, b),
                        speedup=1.2,
                        title=f"{b} for {p.name}",
                        text=f"Change {a} to {b}.",
                        created_at=time.time(),
                    )
                )
    return MemoryIndex.open(str(uri)).upsert(entries)


async def _timed(c, name: str, args: dict) -> float:
    t0 = time.perf_counter()
    r = await c.call_tool(name, args)
    dt = time.perf_counter() - t0
    assert not r.is_error, r.content
    return dt


async def _profiled(c, args: dict) -> tuple[float, float]:
    """A profile_kernel call: its wall seconds over the client, and the profile's own (the
    judge's `Profile.wall_s`, measured where it ran)."""
    t0 = time.perf_counter()
    r = await c.call_tool("profile_kernel", args)
    dt = time.perf_counter() - t0
    assert not r.is_error and r.structured_content["status"] == "passed", r.content
    return dt, float(r.structured_content["profile"]["wall_s"])


def _path_figures(walls: dict[str, list[float]], own: dict[str, list[float]]) -> dict:
    """Per path: the median wall, and the median of what the path added to each profile (its
    wall less the profile's own wall_s): the profile itself varies by tens of percent from one
    call to the next (the adaptive rounds, the host), which the path's cost is not."""
    added = {k: [w - o for w, o in zip(walls[k], own[k], strict=True)] for k in walls}
    return {
        **{f"{k}_median": median(v) for k, v in walls.items()},
        **{f"{k}_added_ms_median": median(v) * 1e3 for k, v in added.items()},
        "profile_own_s_median": median([o for v in own.values() for o in v]),
        **walls,
        **{f"{k}_profile_own_s": v for k, v in own.items()},
    }


def _ms(values: list[float]) -> dict:
    return {"p50": percentile(values, 50) * 1e3, "p95": percentile(values, 95) * 1e3, "n": len(values)}


def _latency(root: Path, calls: int, source: str, out: dict) -> None:
    from mcp_session import stdio_session

    async def part() -> None:
        async with stdio_session(root, name="mcp-bench") as c:
            await _timed(c, "get_problem", {"problem": SILU_REF})  # the worker's start
            # the server warmed its memory while it started: this is its first search
            out["first_search_ms"] = await _timed(c, "search_memory", {"query": "warm-up"}) * 1e3
            lat: dict[str, list[float]] = {"list_problems": [], "get_problem": [], "search_memory": []}
            by_kind: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
            embedding: dict[str, dict[str, int]] = {k: {} for k in QUERY_KINDS}
            for i in range(calls):
                lat["list_problems"].append(await _timed(c, "list_problems", {"suite": "cpu_v2"}))
                lat["get_problem"].append(await _timed(c, "get_problem", {"problem": SILU_REF}))
                kind = QUERY_KINDS[i % len(QUERY_KINDS)]
                q: dict = {"query": f"faster loop {i}"} if kind == "text" else {"problem": SILU_REF}
                if kind == "kernel":  # never seen by the server (a comment of its own)
                    q["kernel"] = f"/* variant {i} */\n{source}"
                elif kind == "kernel_after_profile":  # the agent's loop: profile it, then search by it
                    q["kernel"] = f"/* profiled {i} */\n{source}"
                    await _timed(c, "profile_kernel", {"problem": SILU_REF, "source": q["kernel"]})
                elif kind == "baseline":  # the kernel get_problem showed
                    q["kernel"] = source
                t0 = time.perf_counter()
                r = await c.call_tool("search_memory", q)
                dt = time.perf_counter() - t0
                assert not r.is_error, r.content
                lat["search_memory"].append(dt)
                by_kind[kind].append(dt)
                how = r.structured_content["query_embedding"]
                embedding[kind][how] = embedding[kind].get(how, 0) + 1
            out["latency_ms"] = {k: _ms(v) for k, v in lat.items()}
            out["search_memory_ms_by_query"] = {k: _ms(v) for k, v in by_kind.items()}
            out["search_memory_query_embedding"] = embedding

    anyio.run(part)


def _breakdown(uri: Path, calls: int, source: str) -> dict:
    """Where a search's time goes, in this process on the same memory (median ms)."""
    import torch

    from memory_index import MemoryIndex, SearchQuery, query_for

    index = MemoryIndex.open(str(uri))
    emb = index.embedder
    emb.encode(["warm-up"])
    kernel_query = query_for("silu", "elementwise", None, None, source)
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # the process's CPU time (every thread's): the work, not the wait

    def timed(name: str, fn) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        cpu.setdefault(name, []).append((time.process_time() - c0) * 1e3)

    default_threads = torch.get_num_threads()
    for i in range(calls):
        text, kernel = [f"faster loop {i}"], [f"{i} {kernel_query}"]  # new each time
        for threads in (1, 2) if i % 2 else (2, 1):
            torch.set_num_threads(threads)
            timed(f"embed_text_{threads}_threads", lambda t=text: emb.encode(t))
            timed(f"embed_kernel_query_{threads}_threads", lambda k=kernel: emb.encode(k))
    torch.set_num_threads(1)
    vec = emb.encode(["faster loop"])[0]
    hits = index.search(vec, SearchQuery(top_m=8))
    ids = [h.entry_id for h in hits]
    for _ in range(calls):
        timed("vector_search", lambda: index.search(vec, SearchQuery(top_m=8)))
        timed(f"provenance_{len(ids)}_hits_one_query", lambda: index.get_many(ids))
        timed(f"provenance_{len(ids)}_hits_one_query_each", lambda: [index.get(i) for i in ids])
    torch.set_num_threads(default_threads)
    return {
        "torch_default_threads": default_threads,
        "kernel_query_chars": len(kernel_query),
        **{k: round(median(v), 2) for k, v in times.items()},
        "cpu_ms": {k: round(median(v), 2) for k, v in cpu.items()},
        "n": calls,
    }


def bench(parts: set[str], rounds: int, calls: int, sessions: int) -> dict:
    import suites

    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    root = tmp / "runs"
    seeded = _seed_memory(root / "memory")
    problem = suites.get_problem(SILU_REF)
    source = problem.baseline.entry_file().content
    out: dict = {"load_before": _load(), "nice": os.nice(0), "memory_entries": seeded}
    if "latency" in parts:
        _latency(root, calls, source, out)
    if "breakdown" in parts:
        out["search_breakdown_ms"] = _breakdown(root / "memory", calls, source)
    if "profile" in parts:
        _profile(root, rounds, problem, source, out)
    if "sessions" in parts:
        _sessions(tmp, sessions, out)
    if "pool" in parts:
        _pool(tmp, rounds, problem, source, out)
    out["load_after"] = _load()
    return out


def _profile(root: Path, rounds: int, problem, source: str, out: dict) -> None:
    from mcp_session import stdio_session

    from actors.roles.profiler import kernel_solution, offset_seeds
    from hardware_agents.families import get_agent

    agent = get_agent("cpu")

    async def stdio_part() -> None:
        async with stdio_session(root, name="mcp-bench") as c:
            # warm profiles, interleaved: the tool, then in-process (reversed every other round)
            await _timed(c, "profile_kernel", {"problem": SILU_REF, "source": source})
            agent.profile(problem, kernel_solution("silu", "k", "c", source, problem.baseline))
            walls: dict[str, list[float]] = {"mcp": [], "in_process": []}
            own: dict[str, list[float]] = {"mcp": [], "in_process": []}

            async def via_mcp() -> None:
                wall, its = await _profiled(c, {"problem": SILU_REF, "source": source})
                walls["mcp"].append(wall)
                own["mcp"].append(its)

            def direct(r: int) -> None:
                sol = kernel_solution("silu", "k", "c", source, problem.baseline)
                t0 = time.perf_counter()
                prof = agent.profile(problem, sol, seeds=offset_seeds(7_000_000 + r * 1000))
                walls["in_process"].append(time.perf_counter() - t0)
                own["in_process"].append(prof.wall_s)
                assert prof.status == "passed", prof.log

            for r in range(rounds):
                if r % 2 == 0:
                    await via_mcp()
                    await anyio.to_thread.run_sync(direct, r)
                else:
                    await anyio.to_thread.run_sync(direct, r)
                    await via_mcp()
            fig = _path_figures(walls, own)
            fig["mcp_over_in_process"] = fig["mcp_median"] / fig["in_process_median"]
            out["warm_profile_s"] = fig

    anyio.run(stdio_part)
    agent.close()


def _sessions(tmp: Path, sessions: int, out: dict) -> None:
    """N sessions at once over HTTP, each profiling its own kernel."""
    from mcp_session import free_port, http_server, http_session

    from accelopt import catalog as ev
    from events.logfile import read_events

    token = "bench-" + "t" * 26
    port = free_port()
    http_root = tmp / "http-runs"
    got: dict[str, str] = {}
    with http_server(http_root, f"127.0.0.1:{port}", token):

        async def one(i: int) -> None:
            kernel = (
                f"/* session {i} */\nvoid kernel(const float* x, float* out) {{ *(volatile int*)0 = {i}; }}\n"
            )
            async with http_session(f"http://127.0.0.1:{port}/mcp", token, name=f"bench-{i}") as c:
                r = await c.call_tool("profile_kernel", {"problem": SILU_REF, "source": kernel})
                assert not r.is_error and r.structured_content["status"] == "runtime_error"
                got[r.structured_content["event_id"]] = f"bench-{i}"

        async def all_at_once() -> None:
            async with anyio.create_task_group() as tg:
                for i in range(sessions):
                    tg.start_soon(one, i)

        t0 = time.perf_counter()
        anyio.run(all_at_once)
        wall = time.perf_counter() - t0
    (log,) = http_root.glob("*/log.aolog")
    profiled = [e.event_id for e in read_events(log) if isinstance(e, ev.KernelProfiled)]
    out["concurrent_sessions"] = {
        "sessions": sessions,
        "verdicts_returned": len(got),
        "events_logged": len(profiled),
        "lost": len(set(got) - set(profiled)),
        "duplicated": len(profiled) - len(set(profiled)),
        "wall_s": wall,
    }


def _pool(tmp: Path, rounds: int, problem, source: str, out: dict) -> None:
    from mcp_session import stdio_session, warm_pool

    root, memory = tmp / "pool-runs", tmp / "pool-memory"
    with warm_pool(root, memory, timeout_s=600) as (info, _):
        anyio.run(_pool_rounds, root, memory, info.nats_url, rounds, problem, source, out, stdio_session)


async def _pool_rounds(root, memory, nats_url, rounds, problem, source, out, stdio_session) -> None:
    """Interleaved: the MCP tool (the server's queue -> the pool), then this process's own
    request to the pool (reversed every other round); both warm (one of each first)."""
    from accelopt import catalog as ev
    from accelopt.config import RunConfig
    from accelopt.kernel_id import kernel_id
    from events.log import EventLog
    from events.subjects import role_filter

    elog = await EventLog.connect(nats_url, create=False)
    run_id = f"mcp-bench-{os.getpid()}"
    await elog.publish(
        ev.RunStarted(
            **ev.envelope(ev.RunStarted, run_id, ts=time.time()),
            config=RunConfig(root=str(root)).to_dict(),
            seed=0,
            targets=[
                ev.ProblemTarget(
                    problem=problem, device="cpu", language="c", content_hash=problem.content_hash()
                )
            ],
            kernel_ids="content",
        )
    )
    kid = kernel_id("silu", "c", source)

    async def direct(n: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        req = ev.ProfileRequested(
            **ev.envelope(ev.ProfileRequested, run_id, n, ts=time.time()),
            kernel_id=kid,
            problem="silu",
            device="cpu",
            language="c",
            source=source,
            purpose="reverify",
            seed_offset=7_000_000 + n * 1000,
        )
        sent = await elog.publish(req)
        async for _, e, _ in elog.follow(role_filter("KernelProfiled", run_id), from_seq=sent.seq):
            if isinstance(e, ev.KernelProfiled) and e.request_id == req.event_id:
                assert e.profile.status == "passed", e.profile.log
                return time.perf_counter() - t0, e.profile.wall_s
        raise AssertionError("unreachable")

    try:
        async with stdio_session(root, "--memory", str(memory), name="mcp-bench-pool") as c:
            await _timed(c, "profile_kernel", {"problem": SILU_REF, "source": source})
            await direct(0)
            walls: dict[str, list[float]] = {"mcp": [], "direct_to_pool": []}
            own: dict[str, list[float]] = {"mcp": [], "direct_to_pool": []}
            for r in range(rounds):
                pair = [("mcp", 0), ("direct_to_pool", r + 1)]
                for which, n in pair if r % 2 == 0 else reversed(pair):
                    if which == "mcp":
                        wall, its = await _profiled(c, {"problem": SILU_REF, "source": source})
                    else:
                        wall, its = await direct(n)
                    walls[which].append(wall)
                    own[which].append(its)
            # who profiled the server's calls (its queue's record, removed when it ends)
            backends = [json.loads(p.read_text())["backends"] for p in root.glob(".device_queue.*.json")]
    finally:
        await elog.close()
    fig = _path_figures(walls, own)
    fig["mcp_over_direct"] = fig["mcp_median"] / fig["direct_to_pool_median"]
    out["warm_profile_through_pool_s"] = {**fig, "server_backends": backends}


PARTS = ("latency", "breakdown", "profile", "sessions", "pool")
PART_KEYS = {
    "latency": (
        "latency_ms",
        "search_memory_ms_by_query",
        "search_memory_query_embedding",
        "first_search_ms",
    ),
    "breakdown": ("search_breakdown_ms",),
    "profile": ("warm_profile_s",),
    "sessions": ("concurrent_sessions",),
    "pool": ("warm_profile_through_pool_s",),
}


def _kept(parts: set[str]) -> dict:
    """The figures of the parts not run now, from the results file, with when they were had."""
    from benchmarks._common import RESULTS

    path = RESULTS / "mcp_bench.json"
    if not path.is_file() or parts == set(PARTS):
        return {}
    old = json.loads(path.read_text())
    kept = old.get("not_rerun", {})
    for part in set(PARTS) - parts:
        figures = {k: old[k] for k in PART_KEYS[part] if k in old}
        if figures:
            kept[part] = {"machine": old["machine"], "load_before": old.get("load_before"), **figures}
    for part in parts:
        kept.pop(part, None)
    return {"not_rerun": kept} if kept else {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=8)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if not parts <= set(PARTS):
        print(
            f"--parts: unknown {', '.join(sorted(parts - set(PARTS)))}; parts: {', '.join(PARTS)}",
            file=sys.stderr,
        )
        return 2
    os.environ.setdefault("LANCEDB_LOG", "error")
    kept = _kept(parts)
    figures = bench(parts, args.rounds, args.calls, args.sessions)
    for k, v in figures.items():
        print(k, v)
    save("mcp_bench", {"parts": sorted(parts), **figures, **kept})
    return 0


if __name__ == "__main__":
    sys.exit(main())
