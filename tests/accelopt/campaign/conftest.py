"""The campaign tests drive the real CLI (`accelopt campaign ...`) in subprocesses: a real
nats-server (the root's embedded one), a real local Ray, real compiled and sandboxed CPU
kernels, the offline builtin/tuner model and a real LanceDB memory. `loop_cli` (the loop
tests' helpers) is borrowed from tests/accelopt/loop."""

from __future__ import annotations

import sys

from testdirs import LOOP

sys.path.insert(0, str(LOOP))
