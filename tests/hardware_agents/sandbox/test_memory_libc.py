"""The sandbox's `memory_libc`: the libc the cpu kernel server and the thread confinement
map memory with; its mmap answers the whole 64-bit address."""

from __future__ import annotations

import ctypes
import mmap
from pathlib import Path

import pytest

from hardware_agents.sandbox import memory_libc

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps (Linux)")


def test_mmap_answers_the_address_the_kernel_mapped() -> None:
    libc = memory_libc()
    size = 4 * mmap.PAGESIZE
    prot = mmap.PROT_READ | mmap.PROT_WRITE
    addr = libc.mmap(None, size, prot, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    try:
        # the kernel may merge the new mapping with a neighbour of the same protection: the
        # address lies inside some mapping, not necessarily at its start
        spans = [
            tuple(int(x, 16) for x in line.split(None, 1)[0].split("-"))
            for line in Path("/proc/self/maps").read_text().splitlines()
        ]
        assert any(start <= addr and addr + size <= end for start, end in spans), hex(addr)
        assert addr > 2**32  # above 4 GiB: a 32-bit int would have cut it
        assert libc.madvise(addr, size, 4) == 0  # MADV_DONTNEED, takes the address whole
        assert libc.mprotect(addr, size, mmap.PROT_READ) == 0
    finally:
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.munmap(addr, size)
