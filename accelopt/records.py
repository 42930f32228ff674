"""Small records shared by events, actors and the memory index."""

from __future__ import annotations

import msgspec

from accelopt.kernel_id import kernel_id


class ChatMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str


class TokenUsage(msgspec.Struct, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # the server reported no usage: counted locally with a tokenizer

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelPrice(msgspec.Struct, kw_only=True):
    """USD per token, as snapshotted into RunStarted from litellm's price map or config."""

    input_cost_per_token: float
    output_cost_per_token: float
    source: str = "litellm"


class MemoryEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One slow->fast pair with its distilled insight (see docs/memory.md)."""

    id: str
    source_run: str
    problem: str
    op_type: str
    device: str
    language: str
    slow_kernel: str
    fast_kernel: str
    speedup: float
    title: str
    text: str
    created_at: float
    positive: bool = True

    # the pair's kernels by their content ids: computed from the entry, never stored, so every
    # row names its kernels as a run does (a memory written before kernels were
    # content-addressed included)
    @property
    def slow_kernel_id(self) -> str:
        return kernel_id(self.problem, self.language, self.slow_kernel)

    @property
    def fast_kernel_id(self) -> str:
        return kernel_id(self.problem, self.language, self.fast_kernel)


ESTIMATED_MARKER = "[ESTIMATED speedup: a cost model's figures (e.g. NKI in the emulator), not a measurement]"
"""How a memory entry of an estimated pair is marked (its text starts with this line): the
memory's stored schema stays as it is, and every reader (prompts, listings) shows it."""


def mark_estimated(text: str) -> str:
    return text if text.startswith(ESTIMATED_MARKER) else f"{ESTIMATED_MARKER}\n{text}"


def is_estimated(text: str) -> bool:
    return text.startswith(ESTIMATED_MARKER)
