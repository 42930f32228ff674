"""This process's C library with the memory calls the sandbox's children make declared:
ctypes' default `int` return would cut mmap's 64-bit address, and its default argument
conversion would pass a large size or address as a 32-bit int."""

from __future__ import annotations

import ctypes


def memory_libc() -> ctypes.CDLL:
    """libc (errno kept) with `mmap`, `mprotect` and `madvise` given their prototypes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc
