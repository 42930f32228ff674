"""The MCP server's memory is kept warm (cli/commands/mcp_server/memory.py): a server loads
torch and the embedding model when it starts, before any memory call, the memory's thread
(where every encode runs) encodes on one torch thread, so a query is not slowed by intra-op
threads spinning against the judge's kernels (benchmarks/mcp_bench.py), and a query asked
again reuses its embedding. Real LanceDB, torch and the bundled model (the encoder wrapped by
a counting spy that calls it); the last test a real `accelopt mcp` over stdio."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
from mcp_session import alive, descendants, stdio_session

from cli.commands.mcp_server.memory import TORCH_THREADS, Memory
from cli.commands.mcp_server.records import SearchMemoryArgs


def test_warm_loads_the_model_and_the_memory_encodes_on_one_thread(tmp_path: Path) -> None:
    import torch

    memory = Memory(tmp_path / "memory")
    memory.warm().result(timeout=300)
    assert memory.index().embedder.loaded  # before any search
    threads = asyncio.run(memory._on_thread(torch.get_num_threads))
    assert threads == TORCH_THREADS == 1, threads  # this 2-core host's default is 2


def _count_encodes(memory: Memory) -> list[list[str]]:
    """What the memory's embedder is asked to encode, call by call, from now on (a spy: the
    real model still encodes)."""
    index = asyncio.run(memory._on_thread(memory.index))
    encoded: list[list[str]] = []
    real = index.embedder.encode

    def counting(texts: list[str]):
        encoded.append(list(texts))
        return real(texts)

    index.embedder.encode = counting
    return encoded


def test_a_query_asked_again_reuses_its_embedding(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "memory")
    encoded = _count_encodes(memory)

    async def searches() -> list:
        return [await memory.search(SearchMemoryArgs(query=q), None, None) for q in ("exp", "tiles", "exp")]

    first, _, again = asyncio.run(searches())
    assert encoded == [["exp"], ["tiles"]] and (first.query, first.hits) == (again.query, again.hits)
    assert (first.query_embedding, again.query_embedding) == ("computed", "kept")


def test_a_kernel_embedded_ahead_is_kept_for_its_search(tmp_path: Path) -> None:
    """`prefetch` (what get_problem and profile_kernel queue for the kernel they show) embeds the
    query a search by that kernel of that problem makes: the search then encodes nothing and
    says so; another kernel, or the same kernel searched for another problem, is computed."""
    memory = Memory(tmp_path / "memory")
    encoded = _count_encodes(memory)
    kernel = "void silu(const float *x, float *y, long n) { for (long i = 0; i < n; i++) y[i] = x[i]; }"
    memory.prefetch("silu", "activation", kernel).result(timeout=300)
    assert len(encoded) == 1 and kernel in encoded[0][0]

    async def searches() -> list:
        return [
            await memory.search(SearchMemoryArgs(kernel=k, problem="cpu_v2/silu"), "activation", name)
            for k, name in ((kernel, "silu"), (kernel.replace("x[i]", "2 * x[i]"), "silu"), (kernel, "gelu"))
        ]

    ahead, other_kernel, other_problem = asyncio.run(searches())
    assert ahead.query_embedding == "kept" and len(encoded) == 3, encoded
    assert other_kernel.query_embedding == other_problem.query_embedding == "computed"
    memory.prefetch("silu", "activation", kernel).result(timeout=60)  # kept: nothing embedded again
    assert len(encoded) == 3


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def test_a_server_loads_torch_when_it_starts_before_any_memory_call(tmp_path: Path) -> None:
    import os

    async def scenario() -> None:
        async with stdio_session(tmp_path / "runs") as c:
            (pid,) = [p for p in descendants(os.getpid()) if alive(p) and b"mcp" in _cmdline(p)]
            deadline = time.monotonic() + 150
            while "libtorch" not in _maps(pid):
                assert time.monotonic() < deadline, "torch was not loaded without a memory call"
                await anyio.sleep(0.5)
            r = await c.call_tool("search_memory", {"query": "vectorized exp"})
            assert not r.is_error and r.structured_content["hits"] == []

    anyio.run(scenario)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
