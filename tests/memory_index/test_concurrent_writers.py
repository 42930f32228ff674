"""Two processes merge-inserting the same new ids at once leave one row per id, on a folder
and on an S3 API (moto), where the loser of each commit race gets a 412 and retries."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from memory_index import MemoryIndex

_WRITER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    import accelopt
    from accelopt.records import MemoryEntry
    from memory_index import MemoryIndex

    uri, seed, barrier, writers = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    index = MemoryIndex.open(uri, storage_options=json.loads(sys.argv[5]))
    rng = np.random.default_rng(seed)
    (barrier / f"ready{seed}").touch()  # start together: once every writer is ready to write
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready*"))) < writers:
        if time.monotonic() > deadline:
            sys.exit("the other writer never got ready")
        time.sleep(0.001)
    for b in range(30):
        batch = [MemoryEntry(id=f"id{i}", source_run=f"w{seed}", problem="p", op_type="o", device="cpu",
                             language="c", slow_kernel="", fast_kernel="", speedup=1.1, title=f"t{i}",
                             text="x", created_at=float(i)) for i in range(b * 4, b * 4 + 4)]
        vecs = rng.standard_normal((4, 384)).astype(np.float32)
        index.upsert_vectors(batch, vecs / np.linalg.norm(vecs, axis=1, keepdims=True))
""")


def test_concurrent_merge_inserts_of_the_same_ids_do_not_duplicate(shared_memory, tmp_path):
    uri, storage_options = shared_memory
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, uri, str(seed), str(barrier), "2", json.dumps(storage_options)]
        )
        for seed in (1, 2)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    index = MemoryIndex.open(uri, storage_options=storage_options)
    ids = [e.id for e in index.list(limit=None)]
    assert len(ids) == len(set(ids)) == 120
