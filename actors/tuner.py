"""`builtin/tuner`: an offline model that tunes a kernel's constants (DESIGN §5).

A litellm custom provider (`register_tuner_provider()`, idempotent) that speaks the agents'
text protocol, so the whole system runs with no network and has a no-LLM baseline. It reads
the rendered prompts of `prompts/`; the role comes from the call's litellm metadata
(`accelopt_role`, set by the gateway), else from the prompt's headings.

Tunables: C `#define NAME <int>` (except the problem's shape macros, which the harness
prepends: the axis names listed under "## Shapes") and module-level Python `NAME = <int>`
(Triton, NKI) with an UPPER_CASE name. Values below 1 are not tunables.

- planner: one change to one constant: double or halve (powers of two stay powers of two),
  within bounds (1..8192; TILE/BLOCK constants at most the largest shape; warps 1..32,
  stages 1..8, unroll 1..64).
  The moves of a kernel are ranked in a weighted random order drawn from the kernel and the
  insights (weighted towards the direction the prompt's insights report as faster), and
  sample i takes the i-th move, so a candidate's N plans differ; deterministic in (prompt,
  sample index). Plan text:

      **Increase TILE_J from 32 to 64**
      Change the tunable constant `TILE_J` from 32 to 64 (double it) ...
      CHANGE: TILE_J 32 -> 64

  With no tunable constant it says so ("No tunable constant ...") and proposes nothing.
- executor: applies the plan's `CHANGE:` line (or a "NAME ... 32 -> 64" phrase of a plan
  written by another model) to the current kernel and returns the full kernel in a fence;
  with no applicable change, the kernel unchanged.
- fixer: returns the last working version shown in the prompt (reverting the change);
  with none shown it replies without code.
- summarizer: for the first constant whose value differs between the slow and the fast
  kernel: `**Increase TILE_J (32 -> 64)**`, a description with the measured speedup, and
  original/optimized snippets. "No optimization found" when no constant differs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

import litellm
import msgspec
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage

from actors.parsing import code_blocks

PROVIDER = "builtin"
MODEL = "builtin/tuner"

_C_DEFINE = re.compile(
    r"^(?P<pre>[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?)(?P<value>\d+)(?P<post>\)?[uUlL]*"
    r"[ \t]*(?://[^\n]*|/\*[^\n]*)?)$", re.MULTILINE)
_PY_CONST = re.compile(
    r"^(?P<pre>(?P<name>[A-Z_][A-Z0-9_]*)[ \t]*(?::[ \t]*[\w.\[\]]+[ \t]*)?=[ \t]*)(?P<value>\d+)"
    r"(?P<post>[ \t]*(?:#[^\n]*)?)$", re.MULTILINE)
_SHAPE_LINE = re.compile(r"^- (?P<name>[A-Za-z_]\w*) = (?P<value>\d+)", re.MULTILINE)
_CHANGE = re.compile(r"CHANGE:\s*(?P<name>[A-Za-z_]\w*)\s+(?P<old>\d+)\s*->\s*(?P<new>\d+)")
_LOOSE_CHANGE = re.compile(
    r"\b(?P<name>[A-Z_][A-Z0-9_]*[A-Z0-9])\b[^\n\d]{0,40}?\b(?P<old>\d+)\s*(?:->|→|=>|\bto\b)\s*(?P<new>\d+)")
_INSIGHT_TITLE = re.compile(r"\*\*(?P<dir>Increase|Decrease)\s+(?P<name>[A-Za-z_]\w*)\b[^*\n]*\*\*")
_SPEEDUP = re.compile(r"(?P<s>\d+(?:\.\d+)?)\s*x\b")
_PROBLEM_LINE = re.compile(r"^Problem: `(?P<problem>[^`]*)` on the device `(?P<device>[^`]*)`", re.MULTILINE)


class Tunable(msgspec.Struct, frozen=True):
    name: str
    value: int
    start: int  # span of the value in the source
    end: int


class Change(msgspec.Struct, frozen=True):
    name: str
    old: int
    new: int

    @property
    def direction(self) -> str:
        return "Increase" if self.new > self.old else "Decrease"


# --- kernels ---------------------------------------------------------------------------------

def find_tunables(source: str, skip: Iterable[str] = ()) -> list[Tunable]:
    """Tunable integer constants of a C or Python kernel, first definition of each name."""
    skipped = set(skip)
    pattern = _C_DEFINE if re.search(r"^[ \t]*#[ \t]*define\b", source, re.MULTILINE) else _PY_CONST
    seen: dict[str, Tunable] = {}
    for m in pattern.finditer(source):
        name, value = m.group("name"), int(m.group("value"))
        if name in skipped or name in seen or value < 1:
            continue
        seen[name] = Tunable(name, value, m.start("value"), m.end("value"))
    return list(seen.values())


def apply_change(source: str, change: Change, skip: Iterable[str] = ()) -> str | None:
    """`source` with the constant set to `change.new`; None if it has no such constant."""
    for t in find_tunables(source, skip):
        if t.name == change.name:
            return source[: t.start] + str(change.new) + source[t.end:]
    return None


def _bounds(name: str, max_shape: int | None) -> tuple[int, int]:
    upper = name.upper()
    if "WARP" in upper:
        return 1, 32
    if "STAGE" in upper:
        return 1, 8
    if "UNROLL" in upper:
        return 1, 64
    hi = 8192
    if max_shape and ("TILE" in upper or "BLOCK" in upper):  # a tile larger than every axis is waste
        hi = min(hi, max_shape)
    return 1, hi


def moves(t: Tunable, max_shape: int | None) -> list[Change]:
    lo, hi = _bounds(t.name, max_shape)
    out = []
    if t.value * 2 <= hi:
        out.append(Change(t.name, t.value, t.value * 2))
    if t.value // 2 >= lo and t.value > 1:
        out.append(Change(t.name, t.value, t.value // 2))
    return out


def insight_preferences(text: str) -> dict[tuple[str, str], float]:
    """(NAME, "Increase"|"Decrease") -> weight from the insights in a prompt: a change reported
    faster is preferred, one reported as a slowdown avoided (and its opposite preferred)."""
    prefs: dict[tuple[str, str], float] = {}
    titles = list(_INSIGHT_TITLE.finditer(text))
    for i, m in enumerate(titles):
        segment = text[m.end(): titles[i + 1].start() if i + 1 < len(titles) else len(text)]
        segment = segment.split("\n## ", 1)[0]
        faster = "slowdown" not in segment.lower()
        name, direction = m.group("name"), m.group("dir")
        other = "Decrease" if direction == "Increase" else "Increase"
        good, bad = (direction, other) if faster else (other, direction)
        prefs[(name, good)] = prefs.get((name, good), 1.0) * 6.0
        prefs[(name, bad)] = prefs.get((name, bad), 1.0) / 6.0
    return prefs


def _unit(*parts: object) -> float:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def rank_changes(source: str, *, skip: Iterable[str] = (), max_shape: int | None = None,
                 prefs: dict[tuple[str, str], float] | None = None, key: str = "") -> list[Change]:
    """Every move over all tunables, in a weighted random order drawn deterministically from
    `key` (weighted sampling without replacement: key u**(1/w), largest first)."""
    options = [c for t in find_tunables(source, skip) for c in moves(t, max_shape)]

    def score(c: Change) -> float:
        w = (prefs or {}).get((c.name, c.direction), 1.0)
        u = max(_unit("tuner-plan", key, c.name, c.old, c.new), 1e-12)
        return u ** (1.0 / w)

    return sorted(options, key=score, reverse=True)


def choose_change(source: str, *, skip: Iterable[str] = (), max_shape: int | None = None,
                  prefs: dict[tuple[str, str], float] | None = None, key: str = "",
                  sample_index: int = 0) -> Change | None:
    """The move for sample `sample_index`: the samples of one kernel (same `key`) walk down one
    ranking, so N plans for a candidate are N different moves while there are enough."""
    ranked = rank_changes(source, skip=skip, max_shape=max_shape, prefs=prefs, key=key)
    return ranked[sample_index % len(ranked)] if ranked else None


def parse_change(plan: str) -> Change | None:
    m = _CHANGE.search(plan) or _LOOSE_CHANGE.search(plan)
    if m is None:
        return None
    return Change(m.group("name"), int(m.group("old")), int(m.group("new")))


# --- prompts ---------------------------------------------------------------------------------

def _section_block(text: str, heading: str) -> tuple[str, str] | None:
    """(code, fence language) of the first fenced block after the line `# heading`."""
    m = re.search(r"^# " + re.escape(heading) + r"[ \t]*$", text, re.MULTILINE)
    if m is None:
        return None
    blocks = code_blocks(text[m.end():])
    if not blocks:
        return None
    return blocks[0].code, blocks[0].lang


def _shapes(text: str) -> dict[str, int]:
    m = re.search(r"^## Shapes.*$", text, re.MULTILINE)
    if m is None:
        return {}
    section = text[m.end():].split("\n\n", 1)[0]
    return {s.group("name"): int(s.group("value")) for s in _SHAPE_LINE.finditer(section)}


def _fenced(code: str, lang: str) -> str:
    return f"```{lang or ''}\n{code.rstrip()}\n```"


def _definition_line(source: str, name: str) -> str:
    for t in find_tunables(source):
        if t.name == name:
            start = source.rfind("\n", 0, t.start) + 1
            end = source.find("\n", t.end)
            return source[start: end if end >= 0 else len(source)].strip()
    return name


def plan_reply(system: str, user: str, sample_index: int) -> str:
    found = _section_block(user, "Current kernel")
    if found is None:
        return "I could not find the current kernel in the prompt, so I propose no change."
    source, _ = found
    shapes = _shapes(user)
    prefs = insight_preferences(system + "\n" + user)
    # the ranking depends on the kernel and the insights, not on the per-call profile order,
    # so the N samples of one candidate take N different moves
    change = choose_change(source, skip=shapes, max_shape=max(shapes.values()) if shapes else None,
                           prefs=prefs, key=f"{source}\x1f{sorted(prefs.items())}", sample_index=sample_index)
    if change is None:
        return ("**Keep the kernel unchanged**\nNo tunable constant (an integer `#define` or an UPPER_CASE "
                "module-level integer) was found in the current kernel, so there is nothing for the tuner "
                "to change.")
    verb = "double" if change.new > change.old else "halve"
    weight = prefs.get((change.name, change.direction))
    if weight is not None and weight > 1.0:
        why = f"An insight in the prompt reports that a {change.direction.lower()} of `{change.name}` made a kernel faster."
    elif weight is not None:
        why = f"Insights advise against the opposite change of `{change.name}`; this explores the other direction."
    else:
        why = f"Retuning `{change.name}` changes the work per block and the reuse of data in fast memory."
    return (f"**{change.direction} {change.name} from {change.old} to {change.new}**\n"
            f"Change the tunable constant `{change.name}` from {change.old} to {change.new} ({verb} it) and "
            f"leave everything else unchanged. {why}\n"
            f"CHANGE: {change.name} {change.old} -> {change.new}")


def execute_reply(user: str) -> str:
    found = _section_block(user, "Current kernel")
    if found is None:
        return "I could not find the current kernel in the prompt."
    source, lang = found
    plan_block = _section_block(user, "Optimization plan")
    change = parse_change(plan_block[0]) if plan_block else None
    skip = _shapes(user)
    new = apply_change(source, change, skip) if change else None
    if change is None or new is None:
        note = "The plan names no change to a tunable constant of this kernel; the kernel is returned unchanged."
        return f"{note}\n\n{_fenced(source, lang)}\n"
    return f"Applied the plan: `{change.name}` {change.old} -> {change.new}.\n\n{_fenced(new, lang)}\n"


def fix_reply(user: str) -> str:
    found = _section_block(user, "Last working version")
    if found is None:
        return ("I cannot fix this kernel: the prompt shows no working version to revert to, and the "
                "tuner does not repair code.")
    source, lang = found
    return f"Reverting to the last version that compiled and passed the checks.\n\n{_fenced(source, lang)}\n"


def summarize_reply(user: str) -> str:
    slow = _section_block(user, "Slow kernel")
    fast = _section_block(user, "Fast kernel")
    if slow is None or fast is None:
        return "No optimization found"
    (slow_src, lang), (fast_src, _) = slow, fast
    fast_values = {t.name: t.value for t in find_tunables(fast_src)}
    diffs = [Change(t.name, t.value, fast_values[t.name]) for t in find_tunables(slow_src)
             if t.name in fast_values and fast_values[t.name] != t.value]
    if not diffs:
        return "No optimization found"
    c = diffs[0]
    sp = re.search(r"^# Speedup[ \t]*$", user, re.MULTILINE)
    speed = _SPEEDUP.search(user[sp.end():]) if sp else None
    speedup = f"{float(speed.group('s')):.3f}x" if speed else "a measured"
    where = _PROBLEM_LINE.search(user)
    context = f" on `{where.group('problem')}` (device {where.group('device')})" if where else ""
    others = "".join(f" `{d.name}` also changed from {d.old} to {d.new}." for d in diffs[1:])
    verb = "Increasing" if c.direction == "Increase" else "Decreasing"
    return (f"**{c.direction} {c.name} ({c.old} -> {c.new})**\n"
            f"{verb} the tunable constant `{c.name}` from {c.old} to {c.new} made the kernel {speedup} "
            f"faster{context}.{others} In kernels with a `{c.name}` constant, try a "
            f"{c.direction.lower()} in the same direction.\n"
            f"Original code:\n{_fenced(_definition_line(slow_src, c.name), lang)}\n"
            f"Optimized code:\n{_fenced(_definition_line(fast_src, c.name), lang)}\n")


def _role_from_prompt(user: str) -> str:
    for heading, role in (("Slow kernel", "summarizer"), ("Wrong code", "fixer"),
                          ("Optimization plan", "executor"), ("Profile", "planner")):
        if re.search(r"^# " + heading + r"[ \t]*$", user, re.MULTILINE):
            return role
    return "planner"


def tuner_reply(messages: Sequence[dict[str, Any]], role: str | None = None, sample_index: int = 0) -> str:
    """The tuner's reply to rendered agent messages (pure and deterministic)."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") != "system")
    role = role or _role_from_prompt(user)
    if role == "planner":
        return plan_reply(system, user, sample_index)
    if role == "executor":
        return execute_reply(user)
    if role == "fixer":
        return fix_reply(user)
    if role == "summarizer":
        return summarize_reply(user)
    raise ValueError(f"builtin/tuner: unknown role {role!r}")


# --- litellm provider ------------------------------------------------------------------------

def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def fill_response(model_response: ModelResponse, model: str, messages: Sequence[dict[str, Any]],
                  text: str, finish_reason: str = "stop") -> ModelResponse:
    model_response.choices[0].message.content = text  # type: ignore[union-attr]
    model_response.choices[0].finish_reason = finish_reason
    prompt = sum(_estimate_tokens(str(m.get("content") or "")) for m in messages)
    completion = _estimate_tokens(text)
    model_response.usage = Usage(prompt_tokens=prompt, completion_tokens=completion,  # type: ignore[attr-defined]
                                 total_tokens=prompt + completion)
    model_response.model = model
    return model_response


def _meta(kwargs: dict[str, Any]) -> dict[str, Any]:
    lp = kwargs.get("litellm_params") or {}
    return dict(lp.get("metadata") or {})


class TunerLLM(CustomLLM):
    """The `builtin/...` provider: every model name under it is the tuner."""

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        meta = _meta(kwargs)
        messages = kwargs.get("messages") or []
        try:
            text = tuner_reply(messages, meta.get("accelopt_role"), int(meta.get("sample_index") or 0))
        except ValueError as e:
            raise litellm.BadRequestError(message=str(e), model=MODEL, llm_provider=PROVIDER) from e
        return fill_response(kwargs["model_response"], MODEL, messages, text)

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.completion(*args, **kwargs)


_HANDLER = TunerLLM()


def register_provider(provider: str, handler: CustomLLM) -> None:
    """Add `provider` to litellm's custom providers once (keeps any other entries)."""
    current = list(litellm.custom_provider_map or [])
    if any(item.get("provider") == provider for item in current):
        return
    current.append({"provider": provider, "custom_handler": handler})
    litellm.custom_provider_map = current
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


def register_tuner_provider() -> None:
    register_provider(PROVIDER, _HANDLER)
