"""The Neuron agent's static checks of a kernel's source: NKIBench rejects lower precision."""

from __future__ import annotations

import io
import re
import tokenize

_LOW_PRECISION = re.compile(r"\b(float16|bfloat16|fp16|bf16|float8\w*|fp8\w*|tfloat32|tf32)\b", re.IGNORECASE)


def strip_comments(src: str) -> str:
    """Python source without comments (strings are kept, so a dtype named in a string counts)."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#[^\n]*", " ", src)


def lower_precision(src: str) -> str | None:
    m = _LOW_PRECISION.search(strip_comments(src))
    return m.group(0) if m else None


__all__ = ["lower_precision", "strip_comments"]
