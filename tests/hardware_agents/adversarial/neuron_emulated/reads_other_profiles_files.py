# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# why: while it is traced, looks for what other profiles and runs left within reach (programs
#      and inputs staged under /dev/shm and the temp dir by concurrent profiles, a checkout's
#      runs/ with best kernels and event logs, Ray's session dir) from its main thread, from a
#      thread of its own and from every BLAS worker it can find (the way an unconfined
#      OpenBLAS thread read them), and tries to plant a file in Ray's session dir. Everything
#      is out of reach: every thread is confined, an agent stages in a 0700 root of its own,
#      runs roots are 0700, Ray's temp dir is ours. Anything read or planted spoils its output
#      (x2): a leak shows as `incorrect`.
import glob
import os
import threading

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_PATTERNS = (
    "/dev/shm/accelopt-*/*/prog*.msgpack",
    "/dev/shm/accelopt-*/*/*.npy",
    "/dev/shm/accelopt-*/*/*/*.npy",
    "/dev/shm/accelopt-private-*/*/prog*.msgpack",
    "/dev/shm/accelopt-private-*/*/*/*.npy",
    "/tmp/accelopt-*/*/*",
    "@REPO@/runs/*/best/*",
    "@REPO@/runs/*/log.aolog",
    "/tmp/ray/session_*/logs/*",
    "/tmp/accelopt-ray-*/session_*/logs/*",
)


def _look(found):
    for pattern in _PATTERNS:
        for path in glob.glob(pattern):
            try:
                with open(path, "rb") as f:
                    if f.read(16):
                        found.append(path)
            except OSError:
                pass
    for session in glob.glob("/tmp/ray/session_*/sockets") + glob.glob(
        "/tmp/accelopt-ray-*/session_*/sockets"
    ):
        try:
            with open(os.path.join(session, "planted"), "wb") as f:
                f.write(b"x")
            found.append(session)
        except OSError:
            pass


_FOUND = []
_look(_FOUND)
_t = threading.Thread(target=_look, args=(_FOUND,))
_t.start()
_t.join()
try:  # numpy's BLAS workers, where it started any (the sandbox sizes its pool to one)
    import threadpoolctl

    _blas_threads = sum(p.get("num_threads", 1) for p in threadpoolctl.threadpool_info())
except Exception:
    _blas_threads = -1
print(
    f"looked from 2 threads ({len(os.listdir('/proc/self/task'))} in the process, BLAS pool {_blas_threads}): "
    f"{len(_FOUND)} readable",
    flush=True,
)


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        y = nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0))
        if _FOUND:  # decided while tracing: the honest kernel's program when nothing was found
            y = nl.multiply(y, 2.0)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=y)
    return out
