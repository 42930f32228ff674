"""Nothing of another profile or run is within a kernel's reach, even by plain file
permissions: a concurrent agent's staged programs (its private root under /dev/shm is 0700),
another run's best kernel and event log (the runs root is 0700), and Ray's session dir (a
0700 temp dir of ours, not the world-writable /tmp/ray). The kernel's child tries from its
main thread and from a thread started before its lockdown (the way OpenBLAS's or CUDA's
threads were reached), first with every wall up, then with Landlock off: the modes alone
must still deny it. A control file in an open folder shows the same child can read and
write where nothing forbids it, so each denial is the wall's."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "cpu"))
from sandbox_targets import Attempts

from accelopt.folders import private_folder
from actors.runtime.deployment import ray_temp_dir
from hardware_agents.sandbox import Sandbox, SandboxPolicy, allow_unisolated

CPU_TESTS = str(Path(__file__).resolve().parent / "cpu")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox drops to another uid only as root")

# another agent process stages a program exactly as the emulate mode does (a 0755 dir of 0644 files)
_OTHER_AGENT = """
import os, sys, time
from hardware_agents.sandbox import default_base_dir, private_dir
d = private_dir(default_base_dir(), "accelopt-nki-programs-")
os.chmod(d, 0o755)
(d / "prog0.msgpack").write_bytes(b"another profile's traced program")
os.chmod(d / "prog0.msgpack", 0o644)
print(d / "prog0.msgpack", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def other_run(tmp_path: Path) -> Iterator[dict[str, list[str]]]:
    agent = subprocess.Popen(
        [sys.executable, "-c", _OTHER_AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert agent.stdout is not None
    program = agent.stdout.readline().strip()
    runs = Path(tempfile.mkdtemp(prefix="accelopt-open-runs-", dir="/tmp"))
    os.chmod(runs, 0o755)  # where a user keeps a checkout: open to everyone
    root = private_folder(runs / "runs")
    (root / "r1" / "best").mkdir(parents=True)
    (root / "r1" / "best" / "silu.c").write_text("// another run's best kernel\n")
    (root / "r1" / "log.aolog").write_bytes(b"another run's event log")
    for f in (root / "r1" / "best" / "silu.c", root / "r1" / "log.aolog"):
        os.chmod(f, 0o644)
    for d in (root / "r1", root / "r1" / "best"):
        os.chmod(d, 0o755)
    sockets = ray_temp_dir() / "session_test_other_runs" / "sockets"
    sockets.mkdir(parents=True, exist_ok=True)
    os.chmod(sockets, 0o777)  # as Ray leaves its own
    (sockets / "raylet").write_bytes(b"")
    open_dir = Path(tempfile.mkdtemp(prefix="accelopt-open-", dir="/tmp"))
    os.chmod(open_dir, 0o777)
    (open_dir / "control").write_text("anyone may read this")
    os.chmod(open_dir / "control", 0o644)
    try:
        yield {
            "staged program": ["read", program],
            "best kernel": ["read", str(root / "r1" / "best" / "silu.c")],
            "event log": ["read", str(root / "r1" / "log.aolog")],
            "ray socket delete": ["unlink", str(sockets / "raylet")],
            "ray session write": ["write", str(sockets / "planted")],
            "control read": ["read", str(open_dir / "control")],
            "control write": ["write", str(open_dir / "planted")],
        }
    finally:
        agent.stdin.close()  # type: ignore[union-attr]
        agent.wait(30)
        shutil.rmtree(runs, ignore_errors=True)
        shutil.rmtree(sockets.parent, ignore_errors=True)
        shutil.rmtree(open_dir, ignore_errors=True)


def _attempt(tries: dict[str, list[str]], **policy: object) -> Attempts:
    pol = SandboxPolicy(wall_timeout_s=30, python_path=(CPU_TESTS,), preload=("early_thread",), **policy)  # type: ignore[arg-type]
    with Sandbox(pol) as box:
        out = box.run("sandbox_targets:attempt_all", msgspec.json.encode(tries))
    assert out.status == "ok", f"{out.error}\n{out.log}"
    return out.decode(Attempts)


def test_another_runs_files_are_out_of_reach_with_every_wall_up(other_run: dict[str, list[str]]) -> None:
    got = _attempt(other_run)
    for thread in (got.main, got.early):
        assert {k: v for k, v in thread.items() if not k.startswith("control")} == {
            k: errno.EACCES for k in other_run if not k.startswith("control")
        }, thread
        assert thread["control read"] == errno.EACCES  # Landlock: outside the allowed trees
    assert os.path.exists(other_run["ray socket delete"][1])


def test_the_modes_alone_keep_them_out(other_run: dict[str, list[str]]) -> None:
    """Landlock off: the control is read and written (the child can), the rest still denied."""
    with allow_unisolated(True):
        got = _attempt(other_run, landlock=False)
    for thread in (got.main, got.early):
        assert thread["control read"] == 0 and thread["control write"] == 0, thread
        for what in other_run:
            if not what.startswith("control"):
                assert thread[what] == errno.EACCES, (what, thread)
    assert os.path.exists(other_run["ray socket delete"][1])
