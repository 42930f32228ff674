"""Every script in `examples/` runs as a user runs it (`python examples/NAME.py`, a fresh
process importing this checkout) and says what it shows: the real profiler on a compiled C
kernel and on an emulated NKI kernel, the real loop (NATS, Ray, builtin/tuner, one small
problem), the real memory with its embedding model, and a verified replay of the loop's
own log. A script without its entry in EXPECTED fails `test_every_example_is_run`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# script -> (its arguments, patterns its output must match, timeout s); "{root}" is the loop's root
EXPECTED: dict[str, tuple[list[str], list[str], float]] = {
    "profile_cpu_kernel.py": (
        [],
        [
            r"^cpu/silu baseline on cpu: passed, median [\d.]+ ms, [\d.]+% of peak \(memory bound\)$",
            r"^  seed0: ok$",
            r"^cpu/silu wrong_silu on cpu: incorrect \(seed0: ",
        ],
        300,
    ),
    "profile_nki_kernel.py": (
        [],
        [
            r"^nki_tune/silu baseline on trn1: unmeasured; correctness: seed0 ok, seed21 ok, fresh ok, fresh-large ok$",
            r"^ESTIMATED latency [\d.]+ ms by accelopt-trn1-cost-model/\d",
        ],
        300,
    ),
    "search_memory.py": (
        [],
        [
            r": 4 entries$",
            r"^top 3 \(any device\):\n  [\d.]+  silu@",
            r"^top 3 \(C on the CPU only\):\n  [\d.]+  silu@cpu \(c, 1\.6x\): Vectorize the sigmoid$",
            r"^# Experiences$",
            r"^\+#pragma omp simd$",
        ],
        300,
    ),
    "run_loop.py": (
        ["--root", "{root}", "--timeout", "540"],
        [
            r"^optimizing cpu_v2/bmm with builtin/tuner, preset quick",
            r"^  profiled \w{8}: passed, [\d.]+ ms$",
            r"^  bmm: iteration 1 done",
            r"^run \S+: completed$",
            r"^bmm: baseline [\d.]+ ms, best [\d.]+ ms, speedup ([\d.]+x|-) \(\d+ kernels profiled\)$",
            r"^log: .+/log\.aolog$",
        ],
        600,
    ),
    "replay_log.py": (
        [],
        [
            r"run synthetic, \d+ events, status completed$",
            r"^verify: ok, \d+ decisions re-derived$",
            r"^verify \(one decision edited\): DIVERGED$",
            r"BeamSelected .* differ in best_kernel_id",
        ],
        120,
    ),
}


def run_example(name: str, args: list[str], timeout: float) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, f"{name} exited {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def check(name: str, text: str, patterns: list[str]) -> None:
    missing = [p for p in patterns if not re.search(p, text, re.MULTILINE)]
    assert not missing, f"{name}: its output lacks {missing}\n{text[-3000:]}"


def test_every_example_is_run():
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts == set(EXPECTED), scripts ^ set(EXPECTED)
    for p in EXAMPLES.glob("*.py"):  # each says what it shows
        assert p.read_text().startswith('"""'), p.name


@pytest.mark.parametrize("name", ["profile_cpu_kernel.py", "profile_nki_kernel.py", "search_memory.py"])
def test_example(name: str) -> None:
    args, patterns, timeout = EXPECTED[name]
    check(name, run_example(name, args, timeout), patterns)


@pytest.fixture(scope="module")
def loop_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of the loop example's run (the run a user's replay reads)."""
    root = tmp_path_factory.mktemp("example-runs")
    args, patterns, timeout = EXPECTED["run_loop.py"]
    text = run_example("run_loop.py", [a.format(root=root) for a in args], timeout)
    check("run_loop.py", text, patterns)
    match = re.search(r"^log: (.+)$", text, re.MULTILINE)
    assert match is not None
    return Path(match.group(1))


@pytest.mark.timeout(900)
def test_the_loop_example_completes_a_run(loop_log: Path) -> None:
    assert loop_log.is_file()


@pytest.mark.timeout(900)
def test_the_replay_example_verifies_the_loop_s_log_and_a_synthetic_one(loop_log: Path) -> None:
    args, patterns, timeout = EXPECTED["replay_log.py"]
    check("replay_log.py", run_example("replay_log.py", args, timeout), patterns)
    text = run_example("replay_log.py", [str(loop_log)], timeout)
    check(
        "replay_log.py LOG",
        text,
        [
            rf"^{re.escape(str(loop_log))}: run \S+, \d+ events, status completed$",
            r"^verify: ok, \d+ decisions",
        ],
    )
