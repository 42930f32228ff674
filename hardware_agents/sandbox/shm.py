"""Memory the parent owns and a sandboxed child maps: the kernel's buffers.

A `SharedRegion` is a sealed memfd. The parent maps it read-write and keeps that mapping;
the child inherits the fd and maps it itself. A region made `child_readonly` is sealed with
F_SEAL_FUTURE_WRITE after the parent's mapping exists: from then on no new writable
mapping and no write() can be made by anyone, so the child's mapping is read-only and
cannot be made writable (mprotect fails, and reopening /proc/self/fd/N does not help),
while the parent still writes fresh inputs through the mapping it already has. Every
region is also sealed against shrinking (a child that truncated it would make the
parent's next access fault) and growing, and the seals themselves are sealed.

Nothing the child leaves in a region is believed: the parent reads outputs from its own
mapping while the child is stopped, and checks them against references only it holds.

numpy is imported where a region is made, not with the module: every sandboxed child imports
this package before its lockdown, and numpy's import starts BLAS threads there, which a
Landlock without TSYNC (ABI < 8) would leave unconfined.
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_F_ADD_SEALS = 1033
_F_SEAL_SEAL, _F_SEAL_SHRINK, _F_SEAL_GROW, _F_SEAL_FUTURE_WRITE = 0x1, 0x2, 0x4, 0x10
ALIGN = 64
PAGE = mmap.PAGESIZE


def align_up(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


class SharedRegion:
    def __init__(self, size: int, name: str, *, child_readonly: bool) -> None:
        self.size = max(align_up(size, PAGE), PAGE)
        self.child_readonly = child_readonly
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, self.size)
            self.mm = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            seals = _F_SEAL_SHRINK | _F_SEAL_GROW | _F_SEAL_SEAL
            if child_readonly:
                seals |= _F_SEAL_FUTURE_WRITE
            fcntl.fcntl(self.fd, _F_ADD_SEALS, seals)
        except BaseException:
            os.close(self.fd)
            raise
        import numpy as np  # not at import: see the module doc

        self.buffer = np.frombuffer(self.mm, dtype=np.uint8)

    def array(self, offset: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        import numpy as np

        dt = np.dtype(dtype)
        return self.buffer[offset : offset + math.prod(shape) * dt.itemsize].view(dt).reshape(shape)

    def close(self) -> None:
        """Close the fd; the mapping goes when the last view of it is garbage."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
