# expect: passed
# problem: silu
# why: looks for the float64 references (the agent's private dirs under /dev/shm and the temp
#      dir, in and out of the agent process's private root, any *.npy next to its inputs or above them) and its parent's /proc entries; anything
#      found spoils the output (a leak shows as "incorrect"), nothing found: "passed".
import glob
import os

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_FOUND = []
for pattern in ("/dev/shm/accelopt-nki-refs-*/*", "/dev/shm/*/*/refs/*", "/dev/shm/*/*.npy", "/dev/shm/*/*/*.npy",
                "/tmp/accelopt-nki-refs-*/*", "/tmp/accelopt-private-*/accelopt-nki-refs-*/*",
                "/dev/shm/accelopt-private-*/*/*/*.npy", "/dev/shm/accelopt-private-*/*/*/*/*.npy"):
    for path in glob.glob(pattern):
        try:
            with open(path, "rb") as f:
                if f.read(16):
                    _FOUND.append(path)
        except OSError:
            pass
for name in ("environ", "maps"):
    try:
        with open(f"/proc/{os.getppid()}/{name}", "rb") as f:
            if f.read(16):
                _FOUND.append(name)
    except OSError:
        pass


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    if _FOUND:
        nl.store(out[0:128, :], value=nl.multiply(nl.load(x[0:128, :]), float("nan")))
    return out
