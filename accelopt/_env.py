"""Environment defaults applied before heavy imports.

They keep litellm, Hugging Face, Ray and LanceDB offline and quiet. Every entry point
(CLI, tests, benchmarks, actors) imports `accelopt` first, which applies them; a value
the user already set wins.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS: dict[str, str] = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "LANCEDB_LOG": "error",
}


def apply_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
