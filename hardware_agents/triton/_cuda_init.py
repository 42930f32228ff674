"""Preloaded into GPU sandbox children (before the privilege drop and Landlock): initialise
CUDA and Triton's CUDA driver, which load libraries and build Triton's launcher utilities,
while the process can still read everything. Importing it without a GPU does nothing."""

from __future__ import annotations

import os

if os.environ.get("CUDA_VISIBLE_DEVICES") not in (None, ""):
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.empty(1, device="cuda")
        import triton.runtime.driver

        triton.runtime.driver.active.get_current_device()
