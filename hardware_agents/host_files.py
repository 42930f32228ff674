"""Files all of this user's AccelOpt processes on one host share (the memory ledger, the CPU's
timing lock): one 0700 folder of this user's in `/dev/shm` (else `/tmp`), never under a cache
dir or `$TMPDIR`, which differ between the processes of one host (Ray's workers, a user's
shell, a test's own cache), and files 0600 in it. A sandboxed kernel (another uid) or another
user can neither read, forge nor lock them (a `flock` needs only a read-only descriptor)."""

from __future__ import annotations

import os
from pathlib import Path


class HostFileError(RuntimeError):
    """A shared file cannot be used safely; one line."""


def host_folder() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else Path("/tmp")
    return base / f"accelopt-host-{os.geteuid()}"


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


__all__ = ["HostFileError", "host_folder", "open_private"]
