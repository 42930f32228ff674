"""Preloaded into a sandbox child before the lockdown: starts a thread that blocks every
signal through the raw rt_sigprocmask (glibc's pthread_sigmask would leave its own signals
open), so it can never be asked to confine itself: the sandbox must refuse to run. glibc's
set-id signal (33) stays open: without it the drop to the sandbox uid would wait forever."""

from __future__ import annotations

import ctypes
import threading

_SYS_RT_SIGPROCMASK, _SIG_BLOCK, _SIGSETXID = 14, 0, 33  # x86_64
_libc = ctypes.CDLL(None, use_errno=True)
started = threading.Event()


def _deaf() -> None:
    mask = ctypes.c_uint64(((1 << 64) - 1) & ~(1 << (_SIGSETXID - 1)))
    if _libc.syscall(_SYS_RT_SIGPROCMASK, _SIG_BLOCK, ctypes.byref(mask), None, ctypes.c_size_t(8)) != 0:
        raise OSError(ctypes.get_errno(), "rt_sigprocmask")
    started.set()
    threading.Event().wait()


threading.Thread(target=_deaf, daemon=True, name="deaf").start()
started.wait(10)
