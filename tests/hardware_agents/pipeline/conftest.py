"""Fixtures for the shared judging pipeline's tests: a toy kernel language (toy.py) whose
child runs in the real sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # toy, toy_harness
