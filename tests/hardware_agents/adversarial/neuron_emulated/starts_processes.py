# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# why: the compile child (the kernel's process) starts processes while it is traced: os.fork,
#      subprocess (a shell) and libc's system(). The child runs under seccomp `no_fork` (threads
#      only), so each fails; if any worked, the kernel spoils its own output (x2) so that the
#      hack shows as `incorrect` (the test takes the wall down to see it caught).
import ctypes
import os
import subprocess

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _started_a_process():
    started = []
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        started.append("fork")
    except OSError:
        pass
    try:
        subprocess.run(["/bin/true"], check=True, timeout=10)
        started.append("subprocess")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        if ctypes.CDLL(None).system(b"/bin/true") == 0:
            started.append("system")
    except OSError:
        pass
    return started


SCALE = 2.0 if _started_a_process() else 1.0


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        y = nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0))
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.multiply(y, SCALE) if SCALE != 1.0 else y)
    return out
