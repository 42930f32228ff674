"""`builtin/tuner`: an offline model that tunes a kernel's constants and learns from insights.

A litellm custom provider (`register_tuner_provider(reply)`, idempotent) that speaks the
agents' text protocol, so the whole system runs with no network and has a no-LLM baseline. It
reads the rendered prompts of `prompts/` and nothing else (no memory, no problem files). Each
role's reply is its row's (`actors/llm/role_table.py`: `RoleRow.tuner`, the functions below
for the built-in roles), the role the call's litellm metadata names (`accelopt_role`, set by
the gateway), else the one whose heading the prompt has. Every reply is a pure function of
(messages, role, sample index).

Tunables: what the registered kernel languages' tuner syntaxes match
(`hardware_agents/languages`): for the built-in ones, C `#define NAME <int>` (except the
problem's shape macros, which the harness prepends: the axis names listed under "## Shapes")
and module-level Python `NAME = <int>` (Triton, NKI) with an UPPER_CASE name. Values below 1
are not tunables, unless the kernel declares the constant's legal values with a comment
`// tune: NAME in {a, b, c}` (or `# tune: ...`, `/* tune: ... */`): then the define is a
tunable whatever its value (0/1 switches, identifiers such as `static`/`dynamic`) and moves
stay inside that set.

- planner: a move changes one or several constants at once. Candidate moves, best first:
  1. the insights in the prompt (each `## i.` entry of the memory block): the constants an
     insight names (`NAME 32 -> 64` phrases, `CHANGE:` lines, or `-`/`+` define lines of a
     diff) with their direction and target value, applied together, ranked by the insight's
     measured speedup and its similarity (the same problem counts more than another one,
     and retrieval order stands for similarity); an insight already applied to the kernel
     suggests one more step the same way, at a lower weight; an insight reported as a
     slowdown of one constant pushes the other way (a slowdown of several says nothing about
     which: it steers nothing); an insight the kernel has only some constants of pulls
     in proportion; strongest first, led by a compound move: the strongest fresh insights
     (up to `COMPOUND`) merged constant by constant and applied at once, where following them one per
     iteration would arrive after several; a switch already past an insight's target with no
     further legal value (a loop order at the end of its set) goes to the target;
  2. exploration: single steps (the next legal value, or double/halve), then two-step jumps
     and pairs of single steps on two constants, in a weighted random order drawn from the
     kernel and the insights (moves in a direction the insights report as faster come first).
  The two lists alternate, an insight first, so the memory leads but never takes every
  sample. Sample i takes the i-th move, so a candidate's N plans differ (the coordinator
  gives a candidate planned again the next indices). Plan text:

      **Increase TILE_J from 32 to 64 and decrease UNROLL from 8 to 4**
      Change ... (why: the insight it follows, or exploration)
      CHANGE: TILE_J 32 -> 64
      CHANGE: UNROLL 8 -> 4

  With no tunable constant it says so ("No tunable constant ...") and proposes nothing.
- executor: applies the plan's `CHANGE:` lines (or the "NAME ... 32 -> 64" phrases of a plan
  written by another model) to the current kernel and returns the full kernel in a fence;
  with no applicable change, the kernel unchanged.
- fixer: returns the last working version shown in the prompt (reverting the change);
  with none shown it replies without code.
- summarizer: every constant whose value differs between the slow and the fast kernel:
  `**Increase TILE_J (32 -> 64), decrease UNROLL (8 -> 4)**`, a line
  `Tuned constants: TILE_J 32 -> 64 (increase); UNROLL 8 -> 4 (decrease).`, the measured
  speedup and the problem, and original/optimized snippets. "No optimization found" when
  no constant differs.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import litellm
import msgspec
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage

from actors.llm.parsing import code_blocks
from hardware_agents.languages.tunables import (
    Change,
    Move,
    Tunable,
    Value,
    apply_changes,
    changes_in,
    find_tunables,
    jumps,
    moves,
    parse_changes,
    step_towards,
)

PROVIDER = "builtin"
MODEL = "builtin/tuner"

_SHAPE_LINE = re.compile(r"^- (?P<name>[A-Za-z_]\w*) = (?P<value>\d+)", re.MULTILINE)
_INSIGHT_TITLE = re.compile(r"\*\*(?P<dir>Increase|Decrease)\s+(?P<name>[A-Za-z_]\w*)\b[^*\n]*\*\*")
_SPEEDUP = re.compile(r"(?P<s>\d+(?:\.\d+)?)\s*x\b")
_MEASURED = re.compile(
    r"(?:Measured|Estimated) on `(?P<problem>[^`]*)`[^\n]*?(?P<s>\d+(?:\.\d+)?)\s*x\b(?P<rest>[^\n]*)"
)
_PROBLEM_LINE = re.compile(r"^Problem: `(?P<problem>[^`]*)` on the device `(?P<device>[^`]*)`", re.MULTILINE)
_PROBLEM_NAME = re.compile(r"^Name: (?P<name>\S+)", re.MULTILINE)


class InsightHint(msgspec.Struct, frozen=True):
    """What the tuner reads from one insight of the prompt."""

    rank: int  # 1-based position in the memory block (retrieval order: most similar first)
    problem: str
    speedup: float
    slowdown: bool
    changes: tuple[Change, ...]

    @property
    def telling(self) -> bool:
        """A speedup, or a slowdown of one constant: a slowdown of several constants changed
        at once does not say which of them was slow, so it steers nothing."""
        return not self.slowdown or len(self.changes) == 1


# --- insights --------------------------------------------------------------------------------


def _memory_segments(text: str) -> list[str]:
    """The insight entries of the prompt's memory block (`## i. ...` sections after a
    `# Experiences`-like heading), each as its text."""
    m = re.search(r"^# (?:Experiences|Insights|Memory)\b.*$", text, re.MULTILINE)
    if m is None:
        return []
    block = text[m.end() :]
    nxt = re.search(r"^# \S", block, re.MULTILINE)
    if nxt is not None:
        block = block[: nxt.start()]
    parts = re.split(r"^## ", block, flags=re.MULTILINE)
    return [p for p in parts[1:] if p.strip()]


def parse_insights(text: str) -> list[InsightHint]:
    """The insights of a prompt as constant changes with their speedup and provenance."""
    out: list[InsightHint] = []
    for i, seg in enumerate(_memory_segments(text), 1):
        changes = changes_in(seg)
        if not changes:
            continue
        m = _MEASURED.search(seg)
        if m is not None:
            problem, speedup, rest = m.group("problem"), float(m.group("s")), m.group("rest")
        else:
            s = _SPEEDUP.search(seg)
            problem, speedup, rest = "", float(s.group("s")) if s else 1.05, ""
        slowdown = speedup < 1.0 or "slowdown" in rest.lower()
        out.append(InsightHint(i, problem, speedup, slowdown, tuple(changes)))
    if not out:  # a prompt with insights that are not in a memory block: bold titles only
        for i, m in enumerate(_INSIGHT_TITLE.finditer(text), 1):
            seg = text[m.start() : m.start() + 2000]
            changes = changes_in(seg.split("\n## ", 1)[0]) or [
                Change(m.group("name"), 1, 2 if m.group("dir") == "Increase" else 0)
            ]
            slowdown = "slowdown" in seg.lower()
            out.append(InsightHint(i, "", 1.05, slowdown, tuple(changes[:1])))
    return out


PREFERENCE = 6.0  # how much more (less) likely exploration steps the way insights report faster (slower)


def hint_preferences(hints: Sequence[InsightHint]) -> dict[tuple[str, str], float]:
    """(NAME, "Increase"|"Decrease") -> exploration weight: a direction more insights report
    faster than slower is preferred by PREFERENCE, the opposite way avoided as much. Not
    compounded per insight, so many insights about one constant cannot fill exploration too."""
    votes: dict[tuple[str, str], int] = {}
    for h in hints:
        if not h.telling:
            continue
        for c in h.changes:
            if c.direction == "Set":
                continue
            other = "Decrease" if c.direction == "Increase" else "Increase"
            good, bad = (other, c.direction) if h.slowdown else (c.direction, other)
            votes[(c.name, good)] = votes.get((c.name, good), 0) + 1
            votes[(c.name, bad)] = votes.get((c.name, bad), 0) - 1
    return {k: PREFERENCE if v > 0 else 1.0 / PREFERENCE for k, v in votes.items() if v}


def insight_preferences(text: str) -> dict[tuple[str, str], float]:
    """The exploration preferences of the insights in a prompt (`hint_preferences`)."""
    return hint_preferences(parse_insights(text))


def insight_weight(h: InsightHint, problem: str) -> float:
    """How strongly an insight pulls: its measured gain times its similarity (the same
    problem 1, another 0.6; decaying with its retrieval rank)."""
    gain = math.log(max(h.speedup, 1.0 / h.speedup, 1.0001))
    similarity = (1.0 if problem and h.problem == problem else 0.6) / (1.0 + 0.15 * (h.rank - 1))
    return gain * similarity


class InsightMove(msgspec.Struct, frozen=True):
    """A move the insights of the prompt propose for this kernel."""

    move: Move
    weight: float
    hints: tuple[InsightHint, ...]  # the insights it follows (several for a compound move)
    fresh: bool = True  # False: the insight is applied already and this is one more step


def _toward(t: Tunable, c: Change, slowdown: bool, max_shape: int | None) -> tuple[Change | None, bool]:
    """One insight change on this kernel's constant: (the change, whether it is fresh). An
    insight that reported a slowdown goes back to its old value. A kernel already at or past
    the target takes one more step the same way; where there is no further legal value (a
    switch such as a loop order at the end of its set, whose numbers have no direction), the
    insight's target itself."""
    direction, target = c.direction, c.new
    if slowdown:
        direction, target = {"Increase": "Decrease", "Decrease": "Increase"}.get(direction, "Set"), c.old
    reached = t.value == target or (
        isinstance(t.value, int)
        and isinstance(target, int)
        and direction != "Set"
        and (t.value > target if direction == "Increase" else t.value < target)
    )
    if not reached:
        nxt = step_towards(t, direction, target, max_shape)
        return (Change(t.name, t.value, nxt), True) if nxt is not None else (None, True)
    if direction == "Set":
        return None, False
    nxt = step_towards(t, direction, None, max_shape)
    if nxt is not None:
        return Change(t.name, t.value, nxt), False
    if t.legal and target in t.legal and target != t.value:
        return Change(t.name, t.value, target), True
    return None, False


def insight_moves(
    tunables: Sequence[Tunable], hints: Sequence[InsightHint], problem: str, max_shape: int | None
) -> list[InsightMove]:
    """Each insight as a move on this kernel (all the constants it names that the kernel has),
    with its weight; an insight already applied yields one more step the same way (weight
    x0.3). Slowdown insights propose the opposite direction."""
    by_name = {t.name: t for t in tunables}
    out: list[InsightMove] = []
    for h in hints:
        if not h.telling:
            continue
        # an insight whose constants this kernel only partly has is applied partly, and its
        # gain may have come from the part that is missing: it pulls in proportion
        named = {c.name for c in h.changes}
        w = insight_weight(h, problem) * len(named & by_name.keys()) / max(len(named), 1)
        fresh: list[Change] = []
        further: list[Change] = []
        for c in h.changes:
            t = by_name.get(c.name)
            if t is None:
                continue
            change, is_fresh = _toward(t, c, h.slowdown, max_shape)
            if change is not None:
                (fresh if is_fresh else further).append(change)
        if fresh:
            out.append(InsightMove(tuple(fresh), w, (h,)))
        elif further:
            out.append(InsightMove(tuple(further), w * 0.3, (h,), fresh=False))
    return out


COMPOUND = 3  # how many of the strongest insights a compound move applies at once
COMPOUND_MAX_JUMP = 4  # a compound changes an integer constant by at most this factor


def _modest(c: Change) -> bool:
    """A change a compound may make: a switch or identifier, or an integer within
    COMPOUND_MAX_JUMP of its value. A jump across scales (CHUNK 1024 -> 1) says the insight
    came from a kernel where the constant counts something else: a single move may still try
    it, but it must not spoil the moves it would be compounded with."""
    if isinstance(c.old, int) and isinstance(c.new, int) and c.old > 0 and c.new > 0:
        return max(c.old / c.new, c.new / c.old) <= COMPOUND_MAX_JUMP
    return True


def compound_move(items: Sequence[InsightMove]) -> InsightMove | None:
    """The strongest fresh insight moves merged constant by constant (the stronger insight
    decides a constant both name; only modest changes, `_modest`): where a search that
    follows one insight per iteration arrives after several, in one profile. At most
    `COMPOUND` insights; None unless at least two contribute."""
    chosen: list[Change] = []
    used: list[InsightMove] = []
    for im in sorted((im for im in items if im.fresh), key=lambda im: -im.weight):
        taken = {c.name for c in chosen}
        new = [c for c in im.move if c.name not in taken and _modest(c)]
        if not new:
            continue
        chosen += new
        used.append(im)
        if len(used) == COMPOUND:
            break
    if len(used) < 2:
        return None
    return InsightMove(
        tuple(chosen), sum(im.weight for im in used), tuple(h for im in used for h in im.hints)
    )


def _unit(*parts: object) -> float:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def _weighted_order(items: list[tuple[Move, float]], key: str) -> list[Move]:
    """Weighted sampling without replacement, deterministic in `key`: u**(1/w), largest first."""

    def score(item: tuple[Move, float]) -> float:
        move, w = item
        u = max(_unit("tuner-plan", key, *((c.name, c.old, c.new) for c in move)), 1e-12)
        return u ** (1.0 / max(w, 1e-6))

    return [m for m, _ in sorted(items, key=score, reverse=True)]


def _strongest_first(items: Sequence[InsightMove], key: str) -> list[Move]:
    """The insights' moves by weight, strongest first (ties in an order drawn from `key`),
    led by the compound of the strongest ones when several combine."""

    def score(im: InsightMove) -> tuple[float, float]:
        return (-im.weight, _unit("tuner-insight", key, *((c.name, c.old, c.new) for c in im.move)))

    compound = compound_move(items)
    return ([compound.move] if compound else []) + [im.move for im in sorted(items, key=score)]


def _alternate(led: list[Move], rest: list[Move]) -> list[Move]:
    """Insight, exploration, insight, ...: the memory leads, but never takes every sample of a
    kernel, so insights from other problems cannot crowd out this kernel's own best move."""
    out: list[Move] = []
    for i in range(max(len(led), len(rest))):
        out += led[i : i + 1] + rest[i : i + 1]
    return out


def exploration_moves(
    tunables: Sequence[Tunable], max_shape: int | None, prefs: dict[tuple[str, str], float]
) -> list[tuple[Move, float]]:
    """Single steps (weight 1), two-step jumps (0.5) and pairs of single steps on two
    constants (together half the weight of the singles, however many pairs there are),
    each scaled by the insights' preference for its directions."""

    def pref(c: Change) -> float:
        return prefs.get((c.name, c.direction), 1.0)

    singles = [c for t in tunables for c in moves(t, max_shape)]
    out: list[tuple[Move, float]] = [((c,), pref(c)) for c in singles]
    out += [((c,), 0.5 * pref(c)) for t in tunables for c in jumps(t, max_shape)]
    pairs = [(a, b) for a, b in itertools.combinations(singles, 2) if a.name != b.name]
    each = 0.5 * len(singles) / len(pairs) if pairs else 0.0
    out += [((a, b), each * math.sqrt(pref(a) * pref(b))) for a, b in pairs]
    return out


def rank_moves(
    source: str,
    *,
    skip: Iterable[str] = (),
    max_shape: int | None = None,
    hints: Sequence[InsightHint] = (),
    problem: str = "",
    key: str = "",
) -> list[Move]:
    """Every move, best first: the insights' moves (strongest first) alternating with
    exploration (weighted random order), starting with an insight; duplicates removed."""
    tunables = find_tunables(source, skip)
    prefs = hint_preferences(hints)
    led = _strongest_first(insight_moves(tunables, hints, problem, max_shape), key)
    rest = _weighted_order(exploration_moves(tunables, max_shape, prefs), key)
    seen: set[frozenset[tuple[str, Value]]] = set()
    out: list[Move] = []
    for m in _alternate(led, rest):
        sig = frozenset((c.name, c.new) for c in m)
        if sig not in seen:
            seen.add(sig)
            out.append(m)
    return out


def rank_changes(
    source: str,
    *,
    skip: Iterable[str] = (),
    max_shape: int | None = None,
    prefs: dict[tuple[str, str], float] | None = None,
    key: str = "",
) -> list[Change]:
    """Every single step over all tunables, in a weighted random order drawn deterministically
    from `key`, weighted by `prefs` ((NAME, direction) -> weight)."""
    options: list[tuple[Move, float]] = [
        ((c,), (prefs or {}).get((c.name, c.direction), 1.0))
        for t in find_tunables(source, skip)
        for c in moves(t, max_shape)
    ]
    return [m[0] for m in _weighted_order(options, key)]


def choose_move(ranked: Sequence[Move], sample_index: int) -> Move | None:
    """The move for sample `sample_index` of a ranking (`rank_moves`): the samples of one kernel
    (same `key`) walk down one ranking, so N plans for a candidate are N different moves while
    there are enough."""
    return ranked[sample_index % len(ranked)] if ranked else None


def _section_block(text: str, heading: str) -> tuple[str, str] | None:
    """(code, fence language) of the first fenced block after the line `# heading`."""
    m = re.search(r"^# " + re.escape(heading) + r"[ \t]*$", text, re.MULTILINE)
    if m is None:
        return None
    blocks = code_blocks(text[m.end() :])
    if not blocks:
        return None
    return blocks[0].code, blocks[0].lang


def _shapes(text: str) -> dict[str, int]:
    m = re.search(r"^## Shapes.*$", text, re.MULTILINE)
    if m is None:
        return {}
    section = text[m.end() :].split("\n\n", 1)[0]
    return {s.group("name"): int(s.group("value")) for s in _SHAPE_LINE.finditer(section)}


def _fenced(code: str, lang: str) -> str:
    return f"```{lang or ''}\n{code.rstrip()}\n```"


def _definition_line(source: str, name: str) -> str:
    for t in find_tunables(source):
        if t.name == name:
            start = source.rfind("\n", 0, t.start) + 1
            end = source.find("\n", t.end)
            return source[start : end if end >= 0 else len(source)].strip()
    return name


def _verb(c: Change) -> str:
    return {"Increase": "increase", "Decrease": "decrease"}.get(c.direction, "set")


def _phrase(c: Change) -> str:
    return f"{_verb(c)} {c.name} from {c.old} to {c.new}"


def plan_reply(system: str, user: str, sample_index: int) -> str:
    found = _section_block(user, "Current kernel")
    if found is None:
        return "I could not find the current kernel in the prompt, so I propose no change."
    source, _ = found
    shapes = _shapes(user)
    m = _PROBLEM_NAME.search(user)
    problem = m.group("name") if m else ""
    hints = parse_insights(system + "\n" + user)
    max_shape = max(shapes.values()) if shapes else None
    # the ranking depends on the kernel and the insights, not on the per-call profile order,
    # so the N samples of one candidate take N different moves
    key = f"{source}\x1f{[(h.problem, h.speedup, h.slowdown, h.changes) for h in hints]}"
    ranked = rank_moves(source, skip=shapes, max_shape=max_shape, hints=hints, problem=problem, key=key)
    move = choose_move(ranked, sample_index)
    if move is None:
        return (
            "**Keep the kernel unchanged**\nNo tunable constant (an integer `#define` or an UPPER_CASE "
            "module-level integer) was found in the current kernel, so there is nothing for the tuner "
            "to change."
        )
    found_moves = insight_moves(find_tunables(source, shapes), hints, problem, max_shape)
    compound = compound_move(found_moves)
    led = [im for im in ([compound] if compound else []) + found_moves if im.move == move]
    phrases = [_phrase(c) for c in move]
    title = " and ".join(phrases)
    title = title[0].upper() + title[1:]
    if led and len(led[0].hints) > 1:
        why = (
            "It applies at once the moves of insights "
            + ", ".join(str(h.rank) for h in led[0].hints[:-1])
            + f" and {led[0].hints[-1].rank} of the memory, each on its own constants (measured: "
            + "; ".join(f"{h.speedup:.2f}x on `{h.problem or 'an earlier run'}`" for h in led[0].hints)
            + ")."
        )
    elif led:
        h = led[0].hints[0]
        where = f"on `{h.problem}`" if h.problem else "in an earlier run"
        names = ", ".join(f"`{c.name}`" for c in h.changes)
        if h.slowdown:
            why = f"Insight {h.rank} of the memory reports that changing {names} the other way was a slowdown {where}."
        else:
            why = (
                f"Insight {h.rank} of the memory reports that changing {names} this way gave "
                f"{h.speedup:.2f}x {where}."
            )
    else:
        why = (
            "Retuning "
            + ", ".join(f"`{c.name}`" for c in move)
            + " changes the work per block, the reuse of data in fast memory and the parallel schedule."
        )
    return (
        f"**{title}**\n"
        f"Change the tunable constant{'s' if len(move) > 1 else ''} as follows and leave everything else "
        f"unchanged: {'; '.join(phrases)}. {why}\n"
        + "".join(f"CHANGE: {c.name} {c.old} -> {c.new}\n" for c in move)
    )


def execute_reply(user: str) -> str:
    found = _section_block(user, "Current kernel")
    if found is None:
        return "I could not find the current kernel in the prompt."
    source, lang = found
    plan_block = _section_block(user, "Optimization plan")
    changes = parse_changes(plan_block[0]) if plan_block else []
    new, done = apply_changes(source, changes, _shapes(user))
    if not done:
        note = (
            "The plan names no change to a tunable constant of this kernel; the kernel is returned unchanged."
        )
        return f"{note}\n\n{_fenced(source, lang)}\n"
    what = ", ".join(f"`{c.name}` {c.old} -> {c.new}" for c in done)
    return f"Applied the plan: {what}.\n\n{_fenced(new, lang)}\n"


def fix_reply(user: str) -> str:
    found = _section_block(user, "Last working version")
    if found is None:
        return (
            "I cannot fix this kernel: the prompt shows no working version to revert to, and the "
            "tuner does not repair code."
        )
    source, lang = found
    return f"Reverting to the last version that compiled and passed the checks.\n\n{_fenced(source, lang)}\n"


def summarize_reply(user: str) -> str:
    slow = _section_block(user, "Slow kernel")
    fast = _section_block(user, "Fast kernel")
    if slow is None or fast is None:
        return "No optimization found"
    (slow_src, lang), (fast_src, _) = slow, fast
    fast_values = {t.name: t.value for t in find_tunables(fast_src)}
    diffs = [
        Change(t.name, t.value, fast_values[t.name])
        for t in find_tunables(slow_src)
        if t.name in fast_values and fast_values[t.name] != t.value
    ]
    if not diffs:
        return "No optimization found"
    sp = re.search(r"^# Speedup[ \t]*$", user, re.MULTILINE)
    speed = _SPEEDUP.search(user[sp.end() :]) if sp else None
    speedup = f"{float(speed.group('s')):.3f}x" if speed else "a measured"
    where = _PROBLEM_LINE.search(user)
    context = f" on `{where.group('problem')}` (device {where.group('device')})" if where else ""
    parts = [
        f"{c.direction if i == 0 else _verb(c)} {c.name} ({c.old} -> {c.new})" for i, c in enumerate(diffs)
    ]
    listed = "; ".join(f"{c.name} {c.old} -> {c.new} ({_verb(c)})" for c in diffs)
    names = " and ".join(f"`{c.name}`" for c in diffs)
    snippet_slow = "\n".join(_definition_line(slow_src, c.name) for c in diffs)
    snippet_fast = "\n".join(_definition_line(fast_src, c.name) for c in diffs)
    return (
        f"**{', '.join(parts)}**\n"
        f"Tuned constants: {listed}.\n"
        f"Retuning {names} this way made the kernel {speedup} faster{context}. In kernels with "
        f"{'these constants' if len(diffs) > 1 else 'a `' + diffs[0].name + '` constant'}, try the same "
        f"change{'s' if len(diffs) > 1 else ''} (towards the same values) first.\n"
        f"Original code:\n{_fenced(snippet_slow, lang)}\n"
        f"Optimized code:\n{_fenced(snippet_fast, lang)}\n"
    )


def has_heading(text: str, heading: str) -> bool:
    """Whether `text` has the line `# heading` (a role's prompt, `role_table.RoleRow.heading`)."""
    return re.search(r"^# " + re.escape(heading) + r"[ \t]*$", text, re.MULTILINE) is not None


# --- litellm provider ------------------------------------------------------------------------


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def fill_response(
    model_response: ModelResponse,
    model: str,
    messages: Sequence[dict[str, Any]],
    text: str,
    finish_reason: str = "stop",
) -> ModelResponse:
    model_response.choices[0].message.content = text
    # litellm types this as OpenAI's reasons; a scripted reply may carry any provider's
    model_response.choices[0].finish_reason = finish_reason  # type: ignore[assignment]
    prompt = sum(_estimate_tokens(str(m.get("content") or "")) for m in messages)
    completion = _estimate_tokens(text)
    model_response.usage = Usage(  # type: ignore[attr-defined]
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
    )
    model_response.model = model
    return model_response


def _meta(kwargs: dict[str, Any]) -> dict[str, Any]:
    lp = kwargs.get("litellm_params") or {}
    return dict(lp.get("metadata") or {})


Reply = Callable[[Sequence[dict[str, Any]], str | None, int], str]
"""A reply to rendered messages, the role (the call's `accelopt_role`) and the sample index:
the tuner's is `actors.llm.role_table.tuner_reply`, each role's reply of its row; ValueError
for a role it has none for."""


class TunerLLM(CustomLLM):
    """The `builtin/...` provider: every model name under it is the tuner, whose reply is
    `reply` (each role's row holds its own)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        meta = _meta(kwargs)
        messages = kwargs.get("messages") or []
        try:
            text = self.reply(messages, meta.get("accelopt_role"), int(meta.get("sample_index") or 0))
        except ValueError as e:
            raise litellm.BadRequestError(message=str(e), model=MODEL, llm_provider=PROVIDER) from e
        return fill_response(kwargs["model_response"], MODEL, messages, text)

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.completion(*args, **kwargs)


def register_provider(provider: str, handler: CustomLLM) -> None:
    """Add `provider` to litellm's custom providers once (keeps any other entries)."""
    current = list(litellm.custom_provider_map or [])
    if any(item.get("provider") == provider for item in current):
        return
    current.append({"provider": provider, "custom_handler": handler})
    litellm.custom_provider_map = current
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


def register_tuner_provider(reply: Reply) -> None:
    """Serve `builtin/...` models with the tuner answering by `reply` (once per process)."""
    register_provider(PROVIDER, TunerLLM(reply))
