"""Parsing of agent replies: kernels (fenced code), plans and insights.

Models reply in many shapes; these functions accept what real models produce and say
clearly why a reply is unusable:

- reasoning spans (`<think>...</think>`, `<thinking>`, `<reasoning>`) are removed first, so a
  fence inside the reasoning is never taken for the answer; an unclosed reasoning tag (the
  reply was cut off while thinking) removes everything after it, and a stray closing tag
  (servers that strip the opening one) removes everything before it;
- a kernel is the first fenced block (``` or ~~~, any language tag, which is stripped); a
  block with no closing fence (a reply cut off mid-code) is found (`closed=False`, running
  to the end of the text) but `extract_code` refuses it as `truncated`: half a kernel is
  never profiled;
- with `entry` given, the first block that mentions the entry symbol wins over an earlier
  snippet that does not (a reply that quotes a fragment before the full kernel); with no
  such block, the first block is taken;
- an insight's title is its first `**...**` span and its body the whole reply; a reply
  saying "No optimization found" is a no-op.

Failures raise `ReplyParseError` whose `reason` is a short fixed phrase (for
`ProposalFailed.reason`) and `detail` a longer explanation.
"""

from __future__ import annotations

import re

import msgspec

EMPTY_REPLY = "empty reply"
NO_CODE = "no code block in reply"
EMPTY_CODE = "empty code block"
ONLY_REASONING = "reply holds only reasoning"
TRUNCATED = "truncated"

NOOP_MARKER = "no optimization found"

_REASONING_TAGS = ("think", "thinking", "reasoning", "reflection")
_CLOSED = re.compile(r"<(" + "|".join(_REASONING_TAGS) + r")\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<(" + "|".join(_REASONING_TAGS) + r")\b[^>]*>", re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"</(" + "|".join(_REASONING_TAGS) + r")\s*>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_BOLD = re.compile(r"\*\*(?P<t>[^*\n](?:[^*\n]|\*(?!\*))*?)\*\*")


class ReplyParseError(ValueError):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class CodeBlock(msgspec.Struct, kw_only=True, frozen=True):
    code: str
    lang: str = ""
    closed: bool = True  # False: the reply ended inside the block (truncated output)
    index: int = 0  # position among the reply's blocks
    blocks: int = 1  # how many blocks the reply held


class Insight(msgspec.Struct, kw_only=True, frozen=True):
    title: str
    text: str
    noop: bool = False


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning spans (see the module docstring)."""
    out = _CLOSED.sub("", text)
    strays = list(_STRAY_CLOSE.finditer(out))
    if strays:
        stray = strays[-1]  # "...reasoning</think> answer": the opening tag was stripped upstream
        out = out[stray.end() :]
    m = _OPEN.search(out)
    if m is not None:  # cut off while reasoning
        out = out[: m.start()]
    return out.strip()


def _answer(text: str | None, what: str) -> str:
    """The reply without its reasoning; raises EMPTY_REPLY for no text, ONLY_REASONING for
    nothing (`what`: what the role wanted) after the reasoning."""
    if text is None or not text.strip():
        raise ReplyParseError(EMPTY_REPLY, "the model returned no text")
    answer = strip_reasoning(text)
    if not answer:
        raise ReplyParseError(ONLY_REASONING, f"the reply holds reasoning but no {what} after it")
    return answer


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of `text`, in order (reasoning is not removed here)."""
    lines = text.split("\n")
    found: list[tuple[str, str, bool]] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if m is None:
            i += 1
            continue
        fence = m.group("fence")
        lang = (m.group("info").strip().split() or [""])[0].lower()
        close = re.compile(r"^[ \t]{0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            if close.match(lines[j]):
                closed = True
                break
            body.append(lines[j])
            j += 1
        found.append(("\n".join(body), lang, closed))
        i = j + 1
    return [
        CodeBlock(code=c, lang=lg, closed=cl, index=k, blocks=len(found))
        for k, (c, lg, cl) in enumerate(found)
    ]


def extract_code(text: str | None, *, entry: str | None = None) -> CodeBlock:
    """The kernel in a reply: the first fenced block (see the module docstring)."""
    answer = _answer(text, "answer")
    blocks = [b for b in code_blocks(answer) if b.code.strip()]
    if not blocks:
        if code_blocks(answer):
            raise ReplyParseError(EMPTY_CODE, "the reply's code block is empty")
        raise ReplyParseError(NO_CODE, f"the reply ({len(answer)} chars of prose) has no fenced code block")
    chosen = blocks[0]
    if entry:
        word = re.compile(r"\b" + re.escape(entry) + r"\b")
        chosen = next((b for b in blocks if word.search(b.code)), blocks[0])
    if not chosen.closed:
        raise ReplyParseError(
            TRUNCATED,
            f"the code block has no closing fence: the reply ends mid-code after {len(chosen.code)} chars",
        )
    return CodeBlock(
        code=chosen.code.strip("\n") + "\n",
        lang=chosen.lang,
        closed=chosen.closed,
        index=chosen.index,
        blocks=len(blocks),
    )


def extract_plan(text: str | None) -> str:
    """The plan: the reply without reasoning, trimmed."""
    return _answer(text, "plan")


def parse_insight(text: str | None) -> Insight:
    """Title = the first `**...**` span (else the first line); text = the whole reply."""
    body = _answer(text, "insight")
    if NOOP_MARKER in body.lower():
        return Insight(title="No optimization found", text=body, noop=True)
    m = _BOLD.search(body)
    if m is not None:
        title = m.group("t").strip()
    else:
        first = next(line for line in body.splitlines() if line.strip())
        title = first.strip().lstrip("#").strip().strip("*").strip()
    return Insight(title=title, text=body, noop=False)
