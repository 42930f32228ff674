"""The host's memory ledger (hardware_agents/host_memory.py) across real processes: a holder
killed with SIGKILL (no cleanup of its own) leaves nothing reserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hardware_agents import host_memory


@pytest.fixture()
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger of this test's own (other processes on the host reserve in the real one)."""
    path = tmp_path / "ledger.json"
    monkeypatch.setenv(host_memory.LEDGER_ENV, str(path))
    return path


HOLDER = """
import sys, time
from hardware_agents import host_memory
with host_memory.reserve(int(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_killed_holders_reservation_goes_with_it(ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed while it holds a reservation (kill -9: no cleanup of its own) leaves
    nothing reserved: the next reservation drops it and takes the room at once."""
    monkeypatch.setenv(host_memory.BUDGET_ENV, "100")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "80"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert host_memory.held_bytes() == 80
        # while it lives, 80 of 100 are taken: 30 more wait
        waited = threading.Event()

        def take() -> None:
            with host_memory.reserve(30) as r:
                if r.waited_s > 0.3:
                    waited.set()

        t = threading.Thread(target=take)
        t.start()
        time.sleep(0.6)
        assert t.is_alive()  # still waiting
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        t.join(10)
        assert not t.is_alive() and waited.is_set()
        assert host_memory.held_bytes() == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


OTHER_UID = 0x3A0FFFFF  # a uid of the sandbox range nobody holds (a kernel child's kind)

PEEK = """
import fcntl, os, sys
os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a read-only descriptor is enough to lock
except OSError as e:
    print("refused", e.errno)
else:
    print("locked")
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="runs a child as another uid (sandboxed kernels are one as root)"
)
def test_another_uid_can_neither_read_nor_lock_the_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger lives where any uid may look (/dev/shm); a sandboxed kernel (another uid)
    that could open it could read it, and lock it forever, stopping every profile: it is 0600."""
    import tempfile

    shared = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        shared.chmod(0o755)  # a folder every uid may enter, as /dev/shm is
        path = shared / "ledger.json"
        monkeypatch.setenv(host_memory.LEDGER_ENV, str(path))
        with host_memory.reserve(10):
            out = subprocess.run(
                [sys.executable, "-c", PEEK, str(path), str(OTHER_UID)],
                capture_output=True,
                text=True,
                timeout=60,
            )
        assert out.stdout.split() == ["refused", "13"], out.stdout + out.stderr
        assert (path.stat().st_mode & 0o777) == 0o600
    finally:
        for p in shared.iterdir():
            p.unlink()
        shared.rmdir()


def test_the_hosts_ledger_is_this_users_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an override the ledger is in this user's 0700 host folder (so no other user's
    file or folder is ever used, and no other user can reach this one)."""
    from hardware_agents.host_files import host_folder

    monkeypatch.delenv(host_memory.LEDGER_ENV, raising=False)
    path = host_memory.ledger_path()
    host_memory.held_bytes()
    assert path.parent == host_folder()
    assert path.parent.stat().st_uid == os.geteuid() and (path.parent.stat().st_mode & 0o777) == 0o700
    assert (path.stat().st_mode & 0o777) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a file of another uid")
def test_a_ledger_of_another_user_is_refused_in_one_line(ledger: Path) -> None:
    """A file another user made where the ledger goes (theirs to forge) is never used."""
    ledger.write_text('{"1:0:ab": 1}')
    os.chown(ledger, OTHER_UID, OTHER_UID)
    with pytest.raises(host_memory.LedgerError) as e:
        host_memory.held_bytes()
    assert "belongs to uid" in str(e.value) and "\n" not in str(e.value)


def test_a_lock_held_forever_is_an_error_of_one_line(ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that holds the ledger's lock and never lets go does not stop profiles forever:
    past LOCK_WAIT_S, a LedgerError of one line."""
    monkeypatch.setattr(host_memory, "LOCK_WAIT_S", 0.5)
    host_memory.held_bytes()  # the file exists
    locker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(600)",
            str(ledger),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        errors: list[BaseException] = []

        def take() -> None:
            try:
                with host_memory.reserve(10):
                    pass
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=take, daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "reserve waited on the lock past LOCK_WAIT_S"
        assert len(errors) == 1 and isinstance(errors[0], host_memory.LedgerError)
        assert "still held by another process" in str(errors[0]) and "\n" not in str(errors[0])
    finally:
        locker.kill()
        locker.wait(10)
