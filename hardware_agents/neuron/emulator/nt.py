"""`neuronxcc.nki.typing` (nt) in the emulator: annotations only."""

from __future__ import annotations

from typing import Any


class _Annotation:
    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, item: Any) -> _Annotation:
        return self

    def __repr__(self) -> str:
        return f"nt.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
scalar = _Annotation("scalar")
