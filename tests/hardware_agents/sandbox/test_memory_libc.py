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
        starts = {int(line.split("-", 1)[0], 16) for line in Path("/proc/self/maps").read_text().splitlines()}
        assert addr in starts or any(s <= addr < s + size for s in starts)
        assert addr > 2**32  # above 4 GiB: a 32-bit int would have cut it
        assert libc.madvise(addr, size, 4) == 0  # MADV_DONTNEED, takes the address whole
        assert libc.mprotect(addr, size, mmap.PROT_READ) == 0
    finally:
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.munmap(addr, size)
