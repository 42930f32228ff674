"""`accelopt mcp` against the in-process path: (1) a warm profile through the MCP tool
(stdio, the real client) against the same kernel profiled by the hardware agent in this
process (what a run's profiler calls), interleaved; (2) list_problems / get_problem /
search_memory latency over the real client (the memory seeded with the cpu_v2 baselines'
tunable moves, written through MemoryIndex.upsert); (3) 8 HTTP sessions profiling at once:
every verdict in the session log exactly once.

    .venv/bin/python benchmarks/mcp_bench.py [--rounds 5] [--calls 30] [--sessions 8]

Results: benchmarks/results/mcp_bench.json. Figures are wall seconds of one machine; on a
loaded host the profile medians move with the load (its load average is recorded).
"""

from __future__ import annotations

import argparse
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


def bench(rounds: int, calls: int, sessions: int) -> dict:
    from mcp_session import free_port, http_server, http_session, stdio_session

    import suites
    from accelopt import catalog as ev
    from actors.roles.profiler import kernel_solution, offset_seeds
    from events.logfile import read_events
    from hardware_agents.families import get_agent

    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    root = tmp / "runs"
    seeded = _seed_memory(root / "memory")
    problem = suites.get_problem(SILU_REF)
    source = problem.baseline.entry_file().content
    agent = get_agent("cpu")
    out: dict = {"load_before": _load(), "memory_entries": seeded}

    async def stdio_part() -> None:
        async with stdio_session(root, name="mcp-bench") as c:
            lat: dict[str, list[float]] = {"list_problems": [], "get_problem": [], "search_memory": []}
            await _timed(c, "get_problem", {"problem": SILU_REF})  # the worker's start
            await _timed(c, "search_memory", {"query": "warm-up"})  # the embedding model's load
            for i in range(calls):
                lat["list_problems"].append(await _timed(c, "list_problems", {"suite": "cpu_v2"}))
                lat["get_problem"].append(await _timed(c, "get_problem", {"problem": SILU_REF}))
                q = {"query": f"faster loop {i}"} if i % 2 else {"kernel": source, "problem": SILU_REF}
                lat["search_memory"].append(await _timed(c, "search_memory", q))
            out["latency_ms"] = {
                k: {"p50": percentile(v, 50) * 1e3, "p95": percentile(v, 95) * 1e3, "n": len(v)}
                for k, v in lat.items()
            }
            # warm profiles, interleaved: the tool, then in-process (reversed every other round)
            await _timed(c, "profile_kernel", {"problem": SILU_REF, "source": source})
            agent.profile(problem, kernel_solution("silu", "k", "c", source, problem.baseline))
            mcp_s: list[float] = []
            direct_s: list[float] = []

            async def via_mcp() -> None:
                mcp_s.append(await _timed(c, "profile_kernel", {"problem": SILU_REF, "source": source}))

            def direct(r: int) -> None:
                sol = kernel_solution("silu", "k", "c", source, problem.baseline)
                t0 = time.perf_counter()
                prof = agent.profile(problem, sol, seeds=offset_seeds(7_000_000 + r * 1000))
                direct_s.append(time.perf_counter() - t0)
                assert prof.status == "passed", prof.log

            for r in range(rounds):
                if r % 2 == 0:
                    await via_mcp()
                    await anyio.to_thread.run_sync(direct, r)
                else:
                    await anyio.to_thread.run_sync(direct, r)
                    await via_mcp()
            out["warm_profile_s"] = {
                "mcp_median": median(mcp_s),
                "in_process_median": median(direct_s),
                "mcp_over_in_process": median(mcp_s) / median(direct_s),
                "mcp": mcp_s,
                "in_process": direct_s,
            }

    anyio.run(stdio_part)
    agent.close()

    # N sessions at once over HTTP, each profiling its own kernel
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
    out["load_after"] = _load()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("LANCEDB_LOG", "error")
    figures = bench(args.rounds, args.calls, args.sessions)
    for k, v in figures.items():
        print(k, v)
    save("mcp_bench", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
