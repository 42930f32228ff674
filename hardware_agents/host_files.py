"""Files all of this user's AccelOpt processes on one host share (the memory ledger, the CPU's
timing lock): one 0700 folder of this user's, never under a cache dir or `$TMPDIR`, which
differ between the processes of one host (Ray's workers, a user's shell, a test's own cache),
and files 0600 in it. A sandboxed kernel (another uid) or another user can neither read,
forge nor lock them (a `flock` needs only a read-only descriptor).

Where: for root, `/run/accelopt` (`/run` is root's alone); for another user, a folder named
after the uid in `/dev/shm` (else `/tmp`), one path for every process of the user whatever
its session (the user's `/run/user/<uid>` is not used: it goes with the user's last login
session, lock files held in it included). Another local user could make that name first:
then every use is refused in one line (`open_private`), and the user is told what to remove."""

from __future__ import annotations

import fcntl
import os
import stat
import time
from pathlib import Path

RUN = Path("/run")
SHARED_TMP = (Path("/dev/shm"), Path("/tmp"))


class HostFileError(RuntimeError):
    """A shared file cannot be used safely; one line."""


def _only_writable_by(folder: Path, uid: int) -> bool:
    try:
        st = folder.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == uid
        and not st.st_mode & 0o022
        and os.access(folder, os.W_OK | os.X_OK)
    )


def host_folder(run: Path = RUN, shared_tmp: tuple[Path, ...] = SHARED_TMP) -> Path:
    """The folder of this user's host files (see the module's docstring)."""
    uid = os.geteuid()
    if uid == 0 and _only_writable_by(run, 0):
        return run / "accelopt"
    for base in shared_tmp:
        if base.is_dir() and os.access(base, os.W_OK | os.X_OK):
            return base / f"accelopt-host-{uid}"
    return shared_tmp[-1] / f"accelopt-host-{uid}"


def open_private(path: Path, what: str) -> int:
    """A read-write descriptor of `path` (created 0600), checked to be this user's alone: the
    folder (whoever owns it may swap the file) and the file itself."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    owner = path.parent.lstat().st_uid
    if owner != os.geteuid():
        raise HostFileError(f"{what} {path}: its folder belongs to uid {owner}, not this user")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise HostFileError(f"{what} {path}: {e.strerror}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        os.close(fd)
        raise HostFileError(f"{what} {path} belongs to uid {st.st_uid}, not this user: remove it")
    if st.st_mode & 0o077:
        os.fchmod(fd, 0o600)
    return fd


def lock_exclusive(fd: int, path: Path, what: str, *, wait_s: float, record_holder: bool) -> None:
    """Take the `flock` of `fd` (a file of `open_private`), waiting at most `wait_s`, then a
    HostFileError of one line (a holder stopped with Ctrl-Z, or stuck, would otherwise hold
    every later one forever, without a word). With `record_holder` (a file that holds nothing
    else) the holder writes its pid into it, and the error names it."""
    start = time.monotonic()
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if waited >= wait_s:
            holder = _holder(fd) if record_holder else "another process"
            raise HostFileError(
                f"{what} {path}: still held by {holder} after {wait_s:.0f} s: end that process or let it finish"
                + ("" if record_holder else " (fuser -v it)")
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.01)  # a release is seen within 10 ms
    if record_holder:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(fd: int) -> str:
    """The process that wrote its pid into the lock file, with its state where telling."""
    try:
        pid = int(os.pread(fd, 32, 0).split()[0])
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        name = stat_line[stat_line.index("(") + 1 : stat_line.rindex(")")]
        state = stat_line[stat_line.rindex(")") + 2 :][:1]
    except (OSError, ValueError, IndexError):
        return "another process"
    return f"pid {pid} ({name}{', stopped' if state in 'Tt' else ''})"


__all__ = ["HostFileError", "host_folder", "lock_exclusive", "open_private"]
