"""Confinement is a property of the process: a thread that a library started before the
lockdown (a BLAS worker, a CUDA driver's helper) runs the kernel's code as confined as the
main thread, or the child refuses to run. Real children, real Landlock and seccomp."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hardware_agents.sandbox import Sandbox, SandboxPolicy, allow_unisolated, landlock, threads

HERE = str(Path(__file__).resolve().parent)

pytestmark = pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")


@pytest.fixture
def open_file() -> Iterator[Path]:
    """A file any uid may read, in a folder any uid may write: outside every allowed tree, so
    only Landlock stands between it and the child."""
    folder = Path(tempfile.mkdtemp(prefix="accelopt-open-", dir="/tmp"))
    os.chmod(folder, 0o777)
    secret = folder / "other-run-best-kernel.c"
    secret.write_text("// another run's best kernel\n")
    os.chmod(secret, 0o644)
    try:
        yield secret
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _early(secret: Path, **policy: object):  # type: ignore[no-untyped-def]
    from sandbox_targets import EarlyThread

    pol = SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), preload=("early_thread",), **policy)  # type: ignore[arg-type]
    with Sandbox(pol) as box:
        out = box.run("sandbox_targets:probe_early_thread", str(secret).encode())
    assert out.status == "ok", f"{out.error}\n{out.log}"
    return out, msgspec.msgpack.decode(out.payload, type=EarlyThread)


def test_a_thread_started_before_the_lockdown_is_confined(open_file: Path) -> None:
    """The OpenBLAS route, with a thread that waits for work: what runs on it after the
    lockdown cannot read another run's file, write outside the work dir or open a socket."""
    out, probe = _early(open_file)
    assert probe.read_errno == errno.EACCES
    assert probe.write_errno == errno.EACCES
    assert probe.socket_errno == errno.EPERM
    assert not list(open_file.parent.glob("written-*"))
    record = out.isolation["threads"]
    assert record.startswith("2 (") and record.endswith("each confined (Landlock and seccomp)"), record
    if landlock.abi_version() < 8:
        assert out.isolation["landlock_threads"] == "all (1 other thread(s) confined themselves, one by one)"


def test_the_same_thread_reads_and_writes_with_landlock_off(open_file: Path) -> None:
    """The control: the file is readable and the folder writable by the sandbox uid, so the
    denials above are Landlock's (on the early thread), not the file's mode."""
    with allow_unisolated(True):
        _, probe = _early(open_file, landlock=False)
    assert probe.read_errno == 0 and probe.write_errno == 0
    assert list(open_file.parent.glob("written-*"))


def test_a_thread_that_cannot_be_confined_makes_the_child_refuse() -> None:
    """A thread that blocks every signal cannot be asked to confine itself (without TSYNC):
    the child refuses before any target code runs, and says which thread."""
    if landlock.abi_version() >= 8:
        pytest.skip("TSYNC confines every thread without asking it")
    pol = SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), preload=("early_thread_deaf",))
    with Sandbox(pol) as box:
        out = box.run("hardware_agents.sandbox.probe:nothing")
    assert out.status == "unisolated", f"{out.status}: {out.error}"
    assert "did not confine itself" in out.error, out.error
    assert out.isolation["landlock"].startswith("unavailable: not every thread could be confined")


def test_a_thread_that_blocks_signals_through_glibc_is_confined_all_the_same(open_file: Path) -> None:
    """A library thread that blocks every signal through pthread_sigmask (as driver threads
    do) still confines itself: glibc keeps its cancellation signal, the one borrowed, open."""
    pol = SandboxPolicy(wall_timeout_s=30, python_path=(HERE,), preload=("early_thread_masked",))
    with Sandbox(pol) as box:
        out = box.run("sandbox_targets:read_on_masked_thread", str(open_file).encode())
    assert out.status == "ok", f"{out.error}\n{out.log}"
    assert msgspec.msgpack.decode(out.payload) == errno.EACCES
    assert out.isolation["threads"].endswith("each confined (Landlock and seccomp)")


def test_numpy_with_a_blas_pool_before_the_lockdown_runs_confined() -> None:
    """An honest child whose preload imports numpy with a BLAS pool of two (OpenBLAS caps it at
    the cores): every worker is confined one by one and the child runs (a gate that refused it
    would break the agents)."""
    pol = SandboxPolicy(
        wall_timeout_s=60, python_path=(HERE,), preload=("numpy",), env={"OPENBLAS_NUM_THREADS": "2"}
    )
    with Sandbox(pol) as box:
        out = box.run("hardware_agents.sandbox.probe:nothing")
    assert out.status == "ok", f"{out.error}\n{out.log}"
    n = int(out.isolation["threads"].split(" ", 1)[0])
    assert n >= 2, out.isolation["threads"]  # numpy's OpenBLAS started its worker(s)
    assert out.isolation["threads"].endswith("each confined (Landlock and seccomp)")
    if landlock.abi_version() < 8:
        assert f"({n - 1} other thread(s) confined themselves" in out.isolation["landlock_threads"]


def test_children_start_no_blas_pool_by_default() -> None:
    """The sandbox's environment sizes the pools to one thread: numpy imported before the
    lockdown starts none, and the child has one thread at its report."""
    pol = SandboxPolicy(wall_timeout_s=60, preload=("numpy",))
    with Sandbox(pol) as box:
        out = box.run("hardware_agents.sandbox.probe:nothing")
    assert out.status == "ok", f"{out.error}\n{out.log}"
    assert out.isolation["threads"].startswith("1 ("), out.isolation["threads"]


def test_thread_ids_lists_this_process_threads() -> None:
    ids = threads.thread_ids()
    assert os.getpid() in ids and len(ids) >= 1
