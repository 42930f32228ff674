"""A checkout kept where only its owner may enter (a 0700 home, `/root`, `mktemp -d`), run as
root: every sandboxed child runs as the sandbox's uid, which cannot search that directory.
The children must still reach their packages, the venv's libraries and the agents' data
(`hardware_agents/sandbox/reach.py`), and `accelopt profile` must work as it does anywhere else.

The checkout is a copy of this one's packages in a fresh `mkdtemp` folder (0700) and its
`.venv` is this checkout's, bind-mounted there in a private mount namespace (`unshare -m`):
the physical venv then lives under the 0700 folder too, as it does in a real clone, without
a second 3 GB install. The cache dir (references, builds) sits under the same folder, as
`~/.cache/accelopt` sits under a 0700 home.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hardware_agents.sandbox import reach

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "accelopt",
    "hardware_agents",
    "suites",
    "cli",
    "events",
    "actors",
    "memory_index",
    "prompts",
    "replay",
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("mount"),
    reason="needs root (the sandbox uid exists only as root), unshare and mount",
)


@pytest.fixture(scope="module")
def closed_checkout() -> Path:
    base = Path(tempfile.mkdtemp(prefix="accelopt-home-"))  # 0700, like a home or /root
    assert (base.stat().st_mode & 0o777) == 0o700
    co = base / "checkout"
    co.mkdir()
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, co / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (co / ".venv").mkdir()
    yield co
    shutil.rmtree(base, ignore_errors=True)


def _profile(co: Path, problem: str) -> dict:
    venv = Path(sys.prefix)
    code = (
        "import sys, hardware_agents; "
        f"assert hardware_agents.__file__.startswith({str(co)!r}), hardware_agents.__file__; "
        "from cli.main import main; sys.argv = ['accelopt', *sys.argv[1:]]; sys.exit(main())"
    )
    script = (
        f"mount --bind {venv} {co / '.venv'} && cd {co} && "
        f'exec {co / ".venv/bin/python"} -c "$0" profile {problem} --json'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELOPT_", "PYTHONPATH"))}
    env["ACCELOPT_CACHE_DIR"] = str(co.parent / "cache")
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.stdout.strip(), f"no profile printed (exit {out.returncode}): {out.stderr[-3000:]}"
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("problem", "status"),
    [("cpu/silu", "passed"), ("triton/silu_and_mul_d14336", "unmeasured"), ("nki_tune/silu", "unmeasured")],
)
def test_profiles_from_a_checkout_under_a_0700_directory(
    closed_checkout: Path, problem: str, status: str
) -> None:
    prof = _profile(closed_checkout, problem)
    assert prof["status"] == status, prof.get("log", "")[-2000:]
    assert prof["correctness"] and all(c["passed"] for c in prof["correctness"]), prof["correctness"]
    # the children reached the checkout through the mounts, and the record says so
    assert str(closed_checkout.parent) in prof["isolation"].get("reach", ""), prof["isolation"]
    assert prof["isolation"].get("landlock_reads") == "restricted"
    if problem.startswith("nki"):
        assert prof["estimate"]["latency_ms"] > 0


def test_blocked_ancestor_names_the_topmost_closed_directory(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "a" / "inner"
    inner.mkdir(parents=True)
    outer.chmod(0o700)
    (outer / "a").chmod(0o700)
    nobody = 65534
    top = reach.blocked_ancestor(str(inner / "pkg"), nobody, nobody)
    # tmp_path's own parents may be closed as well (pytest's base temp is 0700): the answer is
    # the topmost closed one, at or above `outer`
    assert top is not None and str(outer).startswith(top)
    outer.chmod(0o755)
    (outer / "a").chmod(0o755)
    assert reach.blocked_ancestor(str(inner / "pkg"), 0, 0) is None  # the owner (root here) passes
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    assert reach.unreachable([str(closed), str(inner)], nobody, nobody) == [f"{closed} (mode 0700)"]
