"""Loading an NKI kernel's entry point from its source file: the same way in the SDK's
harness (`neuron/harness.py`) and the emulator's children (`neuron/emulator/children.py`),
inside the sandbox."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def load_kernel(path: str, entry: str) -> Any:
    """Import the kernel module at `path` (as `accelopt_nki_kernel`) and return `entry`."""
    spec = importlib.util.spec_from_file_location("accelopt_nki_kernel", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, entry, None)
    if fn is None:
        names = [n for n in vars(module) if not n.startswith("_")]
        raise AttributeError(f"the kernel module defines no `{entry}` (it defines: {', '.join(names[:20])})")
    return fn
