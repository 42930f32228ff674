"""What a sandboxed child is given, and its bounds: the rlimits, the private work dir (as
root a tmpfs of its own, capped in bytes and files, so a kernel cannot fill the machine's RAM
through /dev/shm), and the files it leaves there, read back with O_NOFOLLOW and a size cap."""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from hardware_agents.sandbox import realtime
from hardware_agents.sandbox.policy import SandboxPolicy
from hardware_agents.sandbox.uids import pids_of_uid


def default_base_dir() -> Path:
    env = os.environ.get("ACCELOPT_SANDBOX_DIR")
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


_STALE_DIR = re.compile(r"^accelopt-[a-z-]+-(?P<pid>\d+)-")
ROOT_PREFIX = "accelopt-private-"
_roots: dict[tuple[str, int], Path] = {}
_roots_lock = threading.Lock()


def process_root(base: Path) -> Path:
    """This process's own folder under `base` (0700, its uid's), made on first use: every
    private dir of this process (sandbox work dirs, staged inputs, programs, rounds) lives in
    it. No sandbox uid can traverse it, so nothing one profile stages is within reach of
    another profile's child, even by plain file permissions; a child reaches the paths it is
    allowed to read through a mount namespace of its own (`reach.py`). The first call per
    base also removes what processes that are gone left there (`sweep_stale`); this process
    removes its own at exit."""
    key = (str(base), os.getpid())  # a forked child makes its own
    with _roots_lock:
        root = _roots.get(key)
        if root is None or not root.is_dir():
            base.mkdir(parents=True, exist_ok=True)
            sweep_stale(base)
            root = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-", dir=base))
            _roots[key] = root
            atexit.register(remove_tree, root)
    return root


def private_dir(base: Path, prefix: str) -> Path:
    """mkdtemp named `<prefix><pid>-XXXX` (0700) inside this process's root under `base`
    (`process_root`)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=process_root(base)))


def sweep_stale(base: Path) -> list[str]:
    """Remove the `accelopt-<kind>-<pid>-*` dirs of `base` whose process is gone (a SIGKILLed
    agent, e.g. a Ray worker at shutdown, runs no cleanup), the tmpfs mounts in them first;
    the names removed. Assumes the base dir is not shared across PID namespaces (true of
    /dev/shm, which is per IPC namespace, and of a private temp dir)."""
    removed = []
    for entry in os.listdir(base):
        m = _STALE_DIR.match(entry)
        if m and not os.path.exists(f"/proc/{m.group('pid')}"):
            remove_tree(base / entry)
            removed.append(entry)
    return removed


def remove_tree(path: Path) -> None:
    """Unmount whatever is mounted beneath `path` (deepest first), then remove it."""
    inside = str(path) + os.sep
    for mnt in sorted((m for m in _mountpoints() if m.startswith(inside)), key=len, reverse=True):
        _libc.umount2(os.fsencode(mnt), _MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)


def _mountpoints() -> list[str]:
    try:
        with open("/proc/self/mountinfo") as f:
            return [line.split()[4].replace("\\040", " ") for line in f]
    except OSError:
        return []


_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MNT_DETACH = 2, 4, 32, 2
_WORKDIR_FILES = 16384
_libc = ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(path: Path, size: int, uid: int | None) -> str | None:
    """Mount a tmpfs of `size` bytes on `path` (owned by `uid`); None, or why it failed."""
    opts = f"size={size},nr_inodes={_WORKDIR_FILES},mode=0700"
    if uid is not None:
        opts += f",uid={uid},gid={uid}"
    if (
        _libc.mount(b"accelopt-sandbox", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode())
        != 0
    ):
        return os.strerror(ctypes.get_errno())
    return None


def unmount(path: Path) -> None:
    if os.path.ismount(path):
        _libc.umount2(os.fsencode(path), _MNT_DETACH)


def remount_tmpfs(path: Path, size: int) -> bool:
    """Re-cap the tmpfs mounted on `path` at `size` bytes; whether that was done."""
    opts = f"size={size},nr_inodes={_WORKDIR_FILES}".encode()
    flags = _MS_REMOUNT | _MS_NOSUID | _MS_NODEV
    return _libc.mount(b"accelopt-sandbox", os.fsencode(path), b"tmpfs", flags, opts) == 0


def rlimits(policy: SandboxPolicy, timeout: float, uid: int | None) -> dict[str, tuple[int, int]]:
    """(soft, hard) pairs for a child that runs as `uid` (None: as this process's user).
    CPU: SIGXCPU at the soft limit, SIGKILL a second later."""
    cpu = policy.cpu_seconds or int(timeout * (os.cpu_count() or 1) + 5)
    nproc = policy.max_processes
    if uid is None:  # RLIMIT_NPROC counts every process of the user: relative to their count
        nproc += len(pids_of_uid(os.getuid()))
    return {
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_AS": (policy.address_space_bytes,) * 2,
        "RLIMIT_NPROC": (nproc, nproc),
        "RLIMIT_FSIZE": (policy.max_file_bytes,) * 2,
        "RLIMIT_CORE": (0, 0),
        # the child can never raise its own priority above the host's other work, whatever
        # its user may (a kernel at -20 would starve the machine for its whole time limit)
        "RLIMIT_NICE": (0, 0),
        # nor set a real-time priority of its own (the parent gives it one while it is timed,
        # below the parent's watchdog: `realtime.py`), whatever `ulimit -r` its user has
        "RLIMIT_RTPRIO": (0, 0),
        # a thread at the real-time priority it was given, running on without a stop past
        # the budget timer (starved), is killed by the kernel itself
        "RLIMIT_RTTIME": (int(realtime.RTTIME_LIMIT_S * 1e6),) * 2,
    }


def open_child_file(path: Path, max_bytes: int) -> int:
    """An fd for a file the child may have written: no symlinks, regular file, bounded size.
    Opened non-blocking: a FIFO the child put there would otherwise block the open until a
    writer comes, which a stopped or ended child never is (no effect on a regular file's reads)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        raise OSError(errno.EFBIG, f"{path}: {st.st_size} bytes exceeds the limit of {max_bytes}")
    return fd


def read_file_safely(path: Path, max_bytes: int) -> bytes:
    """Read a file the child may have written: no symlinks, regular files only, bounded."""
    with os.fdopen(open_child_file(path, max_bytes), "rb") as f:
        return f.read(max_bytes + 1)
