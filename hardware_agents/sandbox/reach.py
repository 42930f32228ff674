"""Let the sandbox uid reach the trees it may read, wherever the checkout lives.

A sandboxed child drops to a fresh unprivileged uid (as root). Landlock says which trees it
may read, but the kernel's own permission check comes first: every directory on the way to
a tree must be searchable by that uid. A checkout kept where only its owner may enter (a
0700 home, `/root`, a `mktemp -d` folder) hides the child's own packages and the venv's
libraries from it, and every profile would fail at its first lazy import.

`expose(paths, uid, gid)` runs in the child, as root, before the privilege drop. It gives
the child a mount namespace of its own (a slave of the host's: nothing it does there shows
outside), and over each topmost directory the uid cannot search it mounts a small tmpfs
(mode 0755) in which it re-creates the way down to each allowed path and bind-mounts the
real path there. Paths keep their names (imported modules' `__file__`, `sys.path`, the
policy's data dirs all stay valid); what else lived under that directory is simply absent
from the child's view. The paths themselves keep their own modes: a tree its owner made
unreadable stays unreadable (`unreachable` names it).
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_SLAVE = 32, 4096, 16384, 1 << 19
_O_PATH = getattr(os, "O_PATH", 0o10000000)


class ReachError(Exception):
    """The uid cannot reach an allowed path and the mounts that would fix it failed."""


def _searchable(st: os.stat_result, uid: int, gid: int) -> bool:
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocked_ancestor(path: str, uid: int, gid: int) -> str | None:
    """The topmost directory above `path` that `uid`/`gid` (no supplementary groups) cannot
    search, or None when the way down is open."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        d = os.path.join(*parts[:i])
        try:
            st = os.stat(d)
        except OSError:
            return None  # the path does not exist: nothing to expose
        if not _searchable(st, uid, gid):
            return d
    return None


def unreachable(paths: list[str], uid: int, gid: int) -> list[str]:
    """Allowed paths whose own mode keeps `uid` out (a directory it cannot search or a file
    it cannot read): no mount changes that, only their owner can."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            ok = _searchable(st, uid, gid)
        elif st.st_uid == uid:
            ok = bool(st.st_mode & stat.S_IRUSR)
        elif st.st_gid == gid:
            ok = bool(st.st_mode & stat.S_IRGRP)
        else:
            ok = bool(st.st_mode & stat.S_IROTH)
        if not ok:
            out.append(f"{p} (mode {stat.S_IMODE(st.st_mode):04o})")
    return out


def _groups(paths: list[str], uid: int, gid: int) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for p in sorted({os.path.realpath(p) for p in paths}):
        top = blocked_ancestor(p, uid, gid)
        if top is not None:
            groups.setdefault(top, []).append(p)
    return groups


def _mount(
    libc: ctypes.CDLL, src: str | None, dst: str, fstype: str | None, flags: int, data: str | None
) -> None:
    rc = libc.mount(
        None if src is None else os.fsencode(src),
        os.fsencode(dst),
        None if fstype is None else fstype.encode(),
        flags,
        None if data is None else data.encode(),
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise ReachError(f"mount {src or fstype} on {dst}: {os.strerror(err)}")


def expose(paths: list[str], uid: int, gid: int, *, writable: tuple[str, ...] = ()) -> str | None:
    """Make every existing path of `paths` reachable by `uid`/`gid` under its own name (see
    the module doc). Returns a line for the isolation record, or None when nothing was
    blocked. Raises ReachError when something was blocked and could not be exposed."""
    groups = _groups(paths, uid, gid)
    if not groups:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise ReachError(f"no mount namespace: {os.strerror(ctypes.get_errno())}")
    _mount(libc, None, "/", None, _MS_REC | _MS_SLAVE, None)
    rw = {os.path.realpath(p) for p in writable}
    exposed = 0
    umask = os.umask(0o022)  # the way down must be searchable whatever the caller's umask
    try:
        for top, members in groups.items():
            exposed += _expose_under(libc, top, members, rw)
    finally:
        os.umask(umask)
    tops = ", ".join(sorted(groups))
    return f"{exposed} allowed path(s) under {tops} (closed to the sandbox uid) bind-mounted in a mount namespace"


def _expose_under(libc: ctypes.CDLL, top: str, members: list[str], rw: set[str]) -> int:
    """A tmpfs over `top` with each of `members` bind-mounted back under its own name."""
    exposed = 0
    # hold every path before the tmpfs hides it, then put it back under its own name
    held: list[tuple[str, int]] = []
    for p in members:
        if any(p.startswith(q + os.sep) for q, _ in held):
            continue  # inside a path already exposed
        try:
            held.append((p, os.open(p, _O_PATH | os.O_CLOEXEC)))
        except OSError:
            continue
    try:
        _mount(
            libc, "accelopt-reach", top, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"
        )
        for p, fd in held:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(p, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
                Path(p).touch(mode=0o644)
            _mount(libc, f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC, None)
            if p not in rw:
                _mount(libc, None, p, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None)
            exposed += 1
    finally:
        for _, fd in held:
            os.close(fd)
    return exposed
