"""Memory writes on a folder vs an S3 API: entries/s and commit latency, 1 and 2 concurrent writers.

The S3 API is moto's server (the dev extra), run in its own process on a loopback port, so
the figures are LanceDB's commit protocol over HTTP (a conditional PUT per manifest, a
retry when the other writer's commit won), not AWS's network latency. Each writer is a
thread with its own LanceDB connection doing curator-sized merge-inserts (`upsert_vectors`,
precomputed unit vectors: the embedding model's cost is the same for both backends and is
in memory_bench.py). After each case the table is counted: every id once, none missing;
on S3, the server's request log counts manifest PUTs and the 412s of lost commit races.

Usage: python benchmarks/memory_s3_bench.py [--batch 8] [--batches 25] [--writers 1,2]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _common import median, percentile, save

import accelopt  # noqa: F401  (offline defaults)
from accelopt.records import MemoryEntry
from memory_index import MemoryIndex
from memory_index.local_s3 import FAKE_KEY, REGION

DIM = 384


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from moto.server import main; main(sys.argv[1:])",
            "-H",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")


def entries(writer: int, batch: int, n: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            id=f"w{writer}-b{batch}-{i}",
            source_run=f"run-{writer}",
            problem=f"p{i}",
            op_type="o",
            device="cpu",
            language="c",
            slow_kernel="",
            fast_kernel="",
            speedup=1.2,
            title=f"insight {writer}/{batch}/{i}",
            text="x",
            created_at=float(batch),
        )
        for i in range(n)
    ]


def run_case(
    uri: str, options: dict[str, str] | None, writers: int, batch: int, batches: int
) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    seed = MemoryIndex.open(uri, embedder="all-MiniLM-L6-v2", storage_options=options)
    vec = rng.standard_normal((1, DIM)).astype(np.float32)
    seed.upsert_vectors(
        entries(99, 0, 1), vec / np.linalg.norm(vec)
    )  # the table exists before the clock starts
    indices = [MemoryIndex.open(uri, storage_options=options) for _ in range(writers)]
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(writers)

    def work(w: int) -> None:
        local = np.random.default_rng(w)
        start.wait()
        for b in range(batches):
            v = local.standard_normal((batch, DIM)).astype(np.float32)
            t0 = time.perf_counter()
            indices[w].upsert_vectors(entries(w, b, batch), v / np.linalg.norm(v, axis=1, keepdims=True))
            with lock:
                latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    expected = writers * batch * batches + 1
    rows = seed.list(limit=None)
    ids = [e.id for e in rows]
    return {
        "writers": writers,
        "entries": expected - 1,
        "wall_s": round(wall, 3),
        "entries_per_s": round((expected - 1) / wall, 1),
        "commits_per_s": round(writers * batches / wall, 2),
        "commit_p50_ms": round(median(latencies) * 1000, 1),
        "commit_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "rows": len(ids),
        "unique_ids": len(set(ids)),
        "lost": expected - len(set(ids)),
        "duplicated": len(ids) - len(set(ids)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8, help="entries per commit (a curator's micro-batch)")
    ap.add_argument("--batches", type=int, default=25, help="commits per writer")
    ap.add_argument("--writers", default="1,2")
    args = ap.parse_args()
    import boto3

    tmp = Path(tempfile.mkdtemp(prefix="memory-s3-bench-"))
    log = tmp / "moto.log"
    proc, endpoint = start_moto(log)
    options = {
        "endpoint": endpoint,
        "region": REGION,
        "allow_http": "true",
        "aws_access_key_id": FAKE_KEY,
        "aws_secret_access_key": FAKE_KEY,
    }
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_KEY,
    )
    cases: list[dict[str, Any]] = []
    try:
        for writers in (int(w) for w in args.writers.split(",")):
            for backend in ("folder", "s3"):
                if backend == "folder":
                    uri, opts = str(tmp / f"memory-{writers}"), None
                else:
                    bucket = f"bench-{writers}"
                    s3.create_bucket(Bucket=bucket)
                    uri, opts = f"s3://{bucket}/memory", options
                before = log.read_text().splitlines()
                case = {"backend": backend, **run_case(uri, opts, writers, args.batch, args.batches)}
                if backend == "s3":
                    lines = log.read_text().splitlines()[len(before) :]
                    puts = [x for x in lines if "PUT " in x and ".manifest HTTP" in x]
                    case["manifest_puts"] = len(puts)
                    case["commit_conflicts_412"] = sum('" 412 ' in x for x in puts)
                print(case, flush=True)
                cases.append(case)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    save(
        "memory_s3_bench",
        {
            "batch": args.batch,
            "batches_per_writer": args.batches,
            "s3": "moto server (local process, loopback HTTP)",
            "cases": cases,
        },
    )


if __name__ == "__main__":
    main()
