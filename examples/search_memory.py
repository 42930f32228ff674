"""Search the optimization memory: what a planner would be told before optimizing a kernel.

Shows the memory's Python API: open a memory (a LanceDB table of slow -> fast kernel pairs
and their insights, embedded with the bundled all-MiniLM-L6-v2), add entries, and search it
with a `SearchQuery` (how many insights, from which entries, ranked how). With `--uri` it
searches an existing memory, e.g. the one `accelopt demo` or `run_loop.py` filled; without
it, it writes a small memory of four insights into a temporary folder first.

    python examples/search_memory.py [--uri URI] [QUERY]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from accelopt.records import MemoryEntry
from memory_index import MemoryIndex, SearchQuery, format_for_prompt, query_for

# what four runs learnt: (problem, device, language, speedup, title, text, slow -> fast change)
INSIGHTS = [
    (
        "silu", "cpu", "c", 1.6, "Vectorize the sigmoid",
        "Let the compiler vectorize the loop: the scalar expf call per element was the bottleneck.",
        ("for (i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));",
         "#pragma omp simd\nfor (i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));"),
    ),
    (
        "matmul", "cpu", "c", 2.4, "Tile the K loop for L1",
        "Blocking K by 64 keeps a panel of B in L1; the untiled loop streamed B for every row of A.",
        ("#define TILE_K 1", "#define TILE_K 64"),
    ),
    (
        "softmax", "cpu", "c", 1.3, "Fuse the max and sum passes",
        "A running max that rescales the running sum reads each row twice instead of three times.",
        ("#define FUSED 0", "#define FUSED 1"),
    ),
    (
        "silu", "trn1", "nki", 1.9, "Use the activation engine for the sigmoid",
        "nl.sigmoid on the scalar engine overlaps with the vector engine's multiply.",
        ("y = nl.divide(x, 1 + nl.exp(-x))", "y = nl.multiply(x, nl.sigmoid(x))"),
    ),
]  # fmt: skip


def sample_memory(uri: str) -> MemoryIndex:
    """A memory of the four insights above, as runs write them (one entry per slow -> fast pair)."""
    index = MemoryIndex.open(uri)
    index.upsert(
        [
            MemoryEntry(
                id=f"example-{i}",
                source_run="example",
                problem=problem,
                op_type=problem,
                device=device,
                language=language,
                slow_kernel=slow,
                fast_kernel=fast,
                speedup=speedup,
                title=title,
                text=text,
                created_at=time.time(),
            )
            for i, (problem, device, language, speedup, title, text, (slow, fast)) in enumerate(INSIGHTS)
        ]
    )
    return index


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("query", nargs="?", help="what to look for (default: a planner's query for silu in C)")
    p.add_argument("--uri", help="an existing memory (default: a small one written to a temporary folder)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        index = MemoryIndex.open(args.uri) if args.uri else sample_memory(f"{tmp}/memory")
        print(f"memory {index.uri}: {len(index)} entries")
        # the query a planner of silu on the CPU sends (its problem, operator, device, language, kernel)
        query = args.query or query_for("silu", "silu", "cpu", "c", "out[i] = x[i] / (1.0f + expf(-x[i]));")
        for title, q in [
            ("any device", SearchQuery(top_m=3)),
            ("C on the CPU only", SearchQuery(top_m=3, device="cpu", language="c")),
        ]:
            found = index.search(query, q)
            print(f"top {len(found)} ({title}):")
            for r in found:
                print(f"  {r.score:.2f}  {r.problem}@{r.device} ({r.language}, {r.speedup:.1f}x): {r.title}")
        print("what the planner's prompt receives:")
        print(format_for_prompt(index.search(query, SearchQuery(top_m=1, device="cpu"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
