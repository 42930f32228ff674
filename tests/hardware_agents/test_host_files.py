"""Where this user's host files go (`hardware_agents/host_files.py`), and the bounded wait for
their locks: real folders, real processes, real flocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hardware_agents.host_files import HostFileError, host_folder, lock_exclusive, open_private


def test_one_folder_for_every_process_of_the_user(tmp_path: Path) -> None:
    """Root's is in /run (root's alone); another user's is named for the uid in the shared
    tmpfs, one path whatever the session (a login's /run/user/<uid> goes with it)."""
    uid = os.geteuid()
    run, shm = tmp_path / "run", tmp_path / "shm"
    shm.mkdir()
    (run / "user" / str(uid)).mkdir(parents=True, mode=0o700)
    run.chmod(0o755)
    if uid == 0:
        assert host_folder(run, (shm,)) == run / "accelopt"
        run.chmod(0o777)  # a /run others may write is no place for root's files
    assert host_folder(run, (shm,)) == shm / f"accelopt-host-{uid}"


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a folder of another uid")
def test_a_run_of_another_uid_is_not_used_for_roots_files(tmp_path: Path) -> None:
    run, shm = tmp_path / "run", tmp_path / "shm"
    shm.mkdir()
    run.mkdir(mode=0o755)
    os.chown(run, 12345, 12345)
    assert host_folder(run, (shm,)) == shm / "accelopt-host-0"


def test_a_lock_held_by_a_stopped_process_is_an_error_naming_it(tmp_path: Path) -> None:
    """A profile stopped with Ctrl-Z holds the CPU timing lock: every later one waits for its
    bound, then fails in one line that names the holder and says it is stopped."""
    path = tmp_path / "folder" / "x.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, signal, sys\n"
            "from pathlib import Path\n"
            "from hardware_agents.host_files import lock_exclusive, open_private\n"
            "p = Path(sys.argv[1]); fd = open_private(p, 'test lock')\n"
            "lock_exclusive(fd, p, 'test lock', wait_s=5, record_holder=True)\n"
            "os.kill(os.getpid(), signal.SIGSTOP)\n",
            str(path),
        ],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        os.waitpid(holder.pid, os.WUNTRACED)  # it holds the lock, stopped
        fd = open_private(path, "test lock")
        try:
            with pytest.raises(HostFileError) as e:
                lock_exclusive(fd, path, "test lock", wait_s=0.3, record_holder=True)
        finally:
            os.close(fd)
        msg = str(e.value)
        assert f"still held by pid {holder.pid} (python" in msg and ", stopped)" in msg and "\n" not in msg
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    fd = open_private(path, "test lock")  # the holder gone, the lock is free at once
    try:
        lock_exclusive(fd, path, "test lock", wait_s=0.0, record_holder=True)
        assert os.pread(fd, 32, 0) == f"{os.getpid()}\n".encode()
    finally:
        os.close(fd)
