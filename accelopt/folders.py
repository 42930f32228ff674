"""Folders that hold what a run owns (its log, kernels, results, the memory) are private.

A sandboxed kernel runs as another uid on the same host; what the agents keep for runs and
campaigns must be out of its reach even by plain file permissions (Landlock is one wall,
the mode is another). So every root AccelOpt makes (the runs root, a campaign's folder, a
local memory) is made 0700, and an existing one of this user's is tightened to 0700 (its
contents then are unreachable, whatever their own modes). The working directory and the
home directory are never changed: a root named as one of them is left as it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_MODE = 0o700


def private_folder(path: str | Path) -> Path:
    """`path` as a folder only this user may enter (made with its missing parents)."""
    p = Path(path)
    p.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
    resolved = p.resolve()
    if resolved in (Path.cwd().resolve(), Path.home().resolve(), Path("/")):
        return p
    st = resolved.stat()
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(resolved, stat.S_IMODE(st.st_mode) & ~0o077)
    return p
