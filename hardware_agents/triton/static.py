"""Static checks of a Triton/PyTorch solution for known reward hacks (KernelBench's static
checker and FlashInfer-Bench's contest reports): work on other streams or CUDA graphs that
the harness's timer does not see, threads and processes, FFI, patching the libraries the
harness uses, and introspection of the harness. Each hit rejects the kernel with a reason;
the comparison against the reference and the roofline gate catch the rest."""

from __future__ import annotations

import io
import re
import tokenize

_RULES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"\bcuda\s*\.\s*(Stream|stream|set_stream|ExternalStream|graph|CUDAGraph|graphs)\b"),
        "uses another CUDA stream or a CUDA graph; the harness times the default stream, so all work "
        "must be launched there, eagerly",
    ),
    (
        re.compile(
            r"^\s*(?:import|from)\s+(threading|multiprocessing|concurrent|subprocess|ctypes|signal|socket)\b",
            re.MULTILINE,
        ),
        "imports a thread, process, FFI or socket module; kernels run in the caller's thread",
    ),
    (re.compile(r"\bos\s*\.\s*(fork|system|popen|exec\w*|spawn\w*|kill)\b"), "starts or signals processes"),
    (
        re.compile(r"^\s*(?:torch|triton|time|sys|os|gc|builtins)(?:\s*\.\s*\w+)+\s*=(?!=)", re.MULTILINE),
        "assigns to an attribute of a library module (patching what the harness uses)",
    ),
    (
        re.compile(r"\bsetattr\s*\(\s*(?:torch|triton|time|sys|builtins)\b"),
        "patches a library module with setattr",
    ),
    (
        re.compile(
            r"\b(gc\s*\.\s*get_objects|sys\s*\.\s*_getframe|inspect\s*\.\s*(stack|currentframe)|"
            r"sys\s*\.\s*modules)\b"
        ),
        "introspects the calling harness",
    ),
]


def _code_only(source: str) -> str:
    """The source with comments and string literals blanked (docstrings may mention anything)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    out = [list(line) for line in lines]
    for tok in tokens:
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            (sr, sc), (er, ec) = tok.start, tok.end
            for r in range(sr, er + 1):
                row = out[r - 1] if r - 1 < len(out) else []
                lo = sc if r == sr else 0
                hi = ec if r == er else len(row)
                for c in range(lo, min(hi, len(row))):
                    if row[c] != "\n":
                        row[c] = " "
    return "".join("".join(r) for r in out)


def check_sources(sources: dict[str, str]) -> list[str]:
    """Reasons to reject, as `file:line: reason` (empty: nothing found)."""
    hits = []
    for path, content in sources.items():
        if not path.endswith(".py"):
            continue
        code = _code_only(content)
        for pattern, reason in _RULES:
            m = pattern.search(code)
            if m:
                line = code.count("\n", 0, m.start()) + 1
                hits.append(f"{path}:{line}: {reason} (`{m.group(0).strip()}`)")
    return hits
