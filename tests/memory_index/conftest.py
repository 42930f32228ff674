"""Fixtures of the memory tests: one embedding model per session, entry factories, a corpus,
a local S3 API (moto) for memories on `s3://`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accelopt.catalog import MemoryEntryAdded, derive_event_id
from accelopt.records import MemoryEntry
from memory_index import Embedder, MemoryIndex
from memory_index.local_s3 import LocalS3

_counter = itertools.count()

EntryFactory = Callable[..., MemoryEntry]


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, loaded once (every Embedder in this process shares it)."""
    emb = Embedder()
    emb.encode(["warm up"])
    return emb


@pytest.fixture
def memory_uri(tmp_path: Path) -> str:
    return str(tmp_path / "memory")


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    """One moto S3 server on a free loopback port for the session (a bucket per test)."""
    with LocalS3() as s3:
        yield s3


@pytest.fixture
def s3_memory(local_s3: LocalS3) -> tuple[str, dict[str, str]]:
    """A memory URI in a fresh bucket, and the LanceDB storage options that reach it."""
    return f"s3://{local_s3.bucket()}/memory", local_s3.storage_options


@pytest.fixture(params=["folder", "s3"])
def shared_memory(request: pytest.FixtureRequest, memory_uri: str) -> tuple[str, dict[str, str] | None]:
    """A memory several fleets share: a folder, or a prefix on the local S3 API."""
    if request.param == "folder":
        return memory_uri, None
    return request.getfixturevalue("s3_memory")


@pytest.fixture
def memory(memory_uri: str, embedder: Embedder) -> Iterator[MemoryIndex]:
    yield MemoryIndex.open(memory_uri, embedder=embedder)


def new_entry(
    title: str,
    text: str,
    *,
    problem: str = "problem",
    op_type: str | None = None,
    device: str = "cpu",
    language: str = "c",
    speedup: float = 1.3,
    source_run: str = "run-a",
    id: str | None = None,
    positive: bool = True,
) -> MemoryEntry:
    n = next(_counter)
    return MemoryEntry(
        id=id or f"{source_run}-m{n}",
        source_run=source_run,
        problem=problem,
        op_type=op_type or problem,
        device=device,
        language=language,
        slow_kernel=f"/* slow {n} */",
        fast_kernel=f"/* fast {n} */",
        speedup=speedup,
        title=title,
        text=text,
        created_at=1_700_000_000.0 + n,
        positive=positive,
    )


@pytest.fixture
def make_entry() -> EntryFactory:
    return new_entry


def added_events(entries: list[MemoryEntry], run_id: str | None = None) -> list[MemoryEntryAdded]:
    """MemoryEntryAdded events as the coordinator would emit them (ids derived from the entry)."""
    return [
        MemoryEntryAdded(
            event_id=derive_event_id(run_id or e.source_run, "MemoryEntryAdded", e.id),
            run_id=run_id or e.source_run,
            ts=time.time(),
            entry=e,
        )
        for e in entries
    ]


@pytest.fixture
def to_events() -> Callable[..., list[MemoryEntryAdded]]:
    return added_events


CORPUS: list[tuple[str, str, str, str, str, str]] = [
    # (problem, op_type, device, language, title, text)
    (
        "softmax",
        "softmax",
        "cpu",
        "c",
        "**Vectorize exp with a polynomial approximation**",
        "Replace expf in the inner loop by an 8-wide polynomial approximation so the compiler emits AVX2.",
    ),
    (
        "conv2d",
        "convolution",
        "trn1",
        "nki",
        "**Tile output channels over 128 partitions**",
        "Split the output channels into tiles of 128 partitions so the tensor engine stays busy.",
    ),
    (
        "transpose",
        "transpose",
        "trn1",
        "nki",
        "**Use the DMA engine to transpose tiles**",
        "Move 128x128 tiles with a transposing DMA instead of nc_transpose on the tensor engine.",
    ),
    (
        "topk",
        "sort",
        "cpu",
        "c",
        "**Partial selection instead of a full sort**",
        "Keep a k-element heap per row instead of sorting the whole row.",
    ),
    (
        "embedding_lookup",
        "gather",
        "h100",
        "triton",
        "**Coalesce the gather by row blocks**",
        "Load whole embedding rows with a BLOCK_D-wide vector load so accesses coalesce.",
    ),
    (
        "cumsum",
        "scan",
        "cpu",
        "c",
        "**Blocked two-pass prefix sum**",
        "Compute per-block sums in parallel with OpenMP, then add block offsets in a second pass.",
    ),
    (
        "gelu",
        "activation",
        "h100",
        "triton",
        "**Fuse the bias add into the activation**",
        "Read the bias in the same kernel as GELU instead of a separate elementwise kernel.",
    ),
    (
        "histogram",
        "reduction",
        "cpu",
        "c",
        "**Privatize histogram bins per thread**",
        "Give every OpenMP thread its own bins and merge them at the end to avoid atomics.",
    ),
]


@pytest.fixture
def corpus() -> list[MemoryEntry]:
    return [
        new_entry(t, x, problem=p, op_type=o, device=d, language=lang, source_run="run-corpus")
        for p, o, d, lang, t, x in CORPUS
    ]


class CuratorHosts:
    """Memory curators hosted as a run hosts them (`actors.runtime.hosting`, one Ray actor each)."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray

    def start(self, nats_urls: list[str], uri: str, **kwargs: Any) -> tuple[list[Any], list[Any]]:
        """One curator per NATS URL: (actor handles, their `run` refs), each ready (connected,
        model loaded)."""
        from actors.runtime.hosting import ray_host_class

        host = ray_host_class()
        actors = [host.remote("curator", {"nats_url": url, "uri": uri, **kwargs}) for url in nats_urls]
        runs = [a.run.remote() for a in actors]
        assert self.ray.get([a.ready.remote() for a in actors], timeout=120) == [True] * len(actors)
        return actors, runs

    def stop(self, actors: list[Any], runs: list[Any]) -> list[dict[str, Any]]:
        """Stop the curators, wait for their consumers to end; what each says it did."""
        for a in actors:
            a.stop.remote()
        self.ray.get(runs, timeout=60)
        return self.ray.get([a.summary.remote() for a in actors], timeout=60)


@pytest.fixture
def curator_hosts(ray_session: Any) -> CuratorHosts:
    return CuratorHosts(ray_session)
