"""Tunable constants of a kernel and changes to them, in the registered languages' tuner
syntaxes (`hardware_agents/languages`): what a `tune: NAME in {...}` comment allows, the
single steps and jumps of a constant, and the changes a plan, insight or diff names. The
offline tuner (actors/llm/tuner.py) moves them; reports (replay/memory_use.py) read them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from hardware_agents.languages import TunerSyntax, tuner_syntaxes

Value = int | str

_TUNE = re.compile(
    r"(?://|#|/\*)[ \t]*tune:[ \t]*(?P<name>[A-Za-z_]\w*)[ \t]+in[ \t]*\{(?P<values>[^}\n]*)\}"
)
_TOKEN = r"[A-Za-z_]\w*|\d+"
_CHANGE = re.compile(
    r"CHANGE:[ \t]*(?P<name>[A-Za-z_]\w*)[ \t]+(?P<old>" + _TOKEN + r")[ \t]*->[ \t]*(?P<new>" + _TOKEN + r")"
)
_LOOSE_CHANGE = re.compile(
    r"\b(?P<name>[A-Z_][A-Z0-9_]*[A-Z0-9])\b[^\n\d]{0,40}?\b(?P<old>\d+)\s*(?:->|→|=>|\bto\b)\s*(?P<new>\d+)"
)


class Tunable(msgspec.Struct, frozen=True):
    name: str
    value: Value
    start: int  # span of the value in the source
    end: int
    legal: tuple[Value, ...] = ()  # from a `tune: NAME in {...}` comment; () = free integer


class Change(msgspec.Struct, frozen=True):
    name: str
    old: Value
    new: Value

    @property
    def direction(self) -> str:
        if isinstance(self.old, int) and isinstance(self.new, int):
            return "Increase" if self.new > self.old else "Decrease"
        return "Set"


Move = tuple[Change, ...]


def _token(text: str) -> Value:
    text = text.strip().strip("\"'")
    return int(text) if text.isdigit() else text


def legal_values(source: str) -> dict[str, tuple[Value, ...]]:
    """NAME -> legal values declared by `tune: NAME in {...}` comments (integers sorted)."""
    out: dict[str, tuple[Value, ...]] = {}
    for m in _TUNE.finditer(source):
        vals = [_token(v) for v in re.split(r"[,\s]+", m.group("values")) if v.strip()]
        if not vals or m.group("name") in out:
            continue
        if all(isinstance(v, int) for v in vals):
            vals = sorted(set(vals))
        out[m.group("name")] = tuple(dict.fromkeys(vals))
    return out


def syntax_of(source: str) -> TunerSyntax | None:
    """The tuner syntax for a kernel: the first registered one whose `detect` matches it, else
    the first one without `detect`."""
    syntaxes = tuner_syntaxes()
    claimed = next((s for s in syntaxes if s.detect is not None and s.detect.search(source)), None)
    return claimed or next((s for s in syntaxes if s.detect is None), None)


def find_tunables(source: str, skip: Iterable[str] = ()) -> list[Tunable]:
    """Tunable constants of a kernel (in its language's tuner syntax), first definition of each name."""
    syntax = syntax_of(source)
    if syntax is None:
        return []
    skipped = set(skip)
    legal = legal_values(source)
    seen: dict[str, Tunable] = {}
    for m in syntax.constant.finditer(source):
        name = m.group("name")
        value = _token(m.group("value"))
        if name in skipped or name in seen:
            continue
        allowed = legal.get(name, ())
        if not allowed and (not isinstance(value, int) or value < 1):
            continue
        start, end = m.start("value"), m.end("value")
        raw = m.group("value")
        if raw[:1] in "\"'":  # a quoted Python value: replace inside the quotes
            start, end = start + 1, end - 1
        seen[name] = Tunable(name, value, start, end, allowed)
    return list(seen.values())


def apply_change(source: str, change: Change, skip: Iterable[str] = ()) -> str | None:
    """`source` with the constant set to `change.new`; None if it has no such constant."""
    for t in find_tunables(source, skip):
        if t.name == change.name:
            return source[: t.start] + str(change.new) + source[t.end :]
    return None


def apply_changes(
    source: str, changes: Iterable[Change], skip: Iterable[str] = ()
) -> tuple[str, list[Change]]:
    """`source` with every applicable change made, and the changes that were applied."""
    done: list[Change] = []
    for c in changes:
        new = apply_change(source, c, skip)
        if new is not None and new != source:
            source = new
            done.append(c)
    return source, done


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


def _ordered(t: Tunable) -> bool:
    return not t.legal or all(isinstance(v, int) for v in t.legal)


def moves(t: Tunable, max_shape: int | None) -> list[Change]:
    """Single steps of one constant: the neighbouring legal values (up first), or for a
    free integer double and halve within bounds; every other value of a categorical set."""
    if t.legal:
        if not _ordered(t) or t.value not in t.legal:
            if _ordered(t) and isinstance(t.value, int):  # off the grid: step to the nearest legal values
                ups = [v for v in t.legal if v > t.value]  # type: ignore[operator]
                downs = [v for v in t.legal if v < t.value]  # type: ignore[operator]
                return [Change(t.name, t.value, v) for v in (ups[:1] + downs[-1:])]
            return [Change(t.name, t.value, v) for v in t.legal if v != t.value]
        i = t.legal.index(t.value)
        out = []
        if i + 1 < len(t.legal):
            out.append(Change(t.name, t.value, t.legal[i + 1]))
        if i > 0:
            out.append(Change(t.name, t.value, t.legal[i - 1]))
        return out
    assert isinstance(t.value, int)
    lo, hi = _bounds(t.name, max_shape)
    out = []
    if t.value * 2 <= hi:
        out.append(Change(t.name, t.value, t.value * 2))
    if t.value // 2 >= lo and t.value > 1:
        out.append(Change(t.name, t.value, t.value // 2))
    return out


def jumps(t: Tunable, max_shape: int | None) -> list[Change]:
    """Two-step moves of an ordered constant (x4, /4, or two legal values away)."""
    if t.legal:
        if not _ordered(t) or t.value not in t.legal:
            return []
        i = t.legal.index(t.value)
        return [Change(t.name, t.value, t.legal[j]) for j in (i + 2, i - 2) if 0 <= j < len(t.legal)]
    assert isinstance(t.value, int)
    lo, hi = _bounds(t.name, max_shape)
    return [
        Change(t.name, t.value, v)
        for v in (t.value * 4, t.value // 4)
        if lo <= v <= hi and v != t.value and (v > t.value * 2 or v < t.value // 2)
    ]


def step_towards(t: Tunable, direction: str, target: Value | None, max_shape: int | None) -> Value | None:
    """The value an insight asks for: its target when legal and on the right side of the
    current value, else one step in its direction; None if no such value exists."""
    if direction == "Set":
        if target is not None and target != t.value and (not t.legal or target in t.legal):
            return target
        return None
    if not isinstance(t.value, int):
        return None
    up = direction == "Increase"
    if t.legal:
        side = [v for v in t.legal if isinstance(v, int) and (v > t.value if up else v < t.value)]
        if not side:
            return None
        if target in side:
            return target
        return min(side) if up else max(side)
    lo, hi = _bounds(t.name, max_shape)
    if isinstance(target, int) and lo <= target <= hi and (target > t.value if up else target < t.value):
        return target
    nxt = t.value * 2 if up else t.value // 2
    return nxt if lo <= nxt <= hi and nxt != t.value else None


def changes_in(text: str) -> list[Change]:
    """The constant changes a piece of text names: `CHANGE:` lines, `NAME 32 -> 64` phrases,
    and `-`/`+` define (or Python constant) lines of a diff; first mention of a name wins."""
    found: dict[str, Change] = {}
    for m in _CHANGE.finditer(text):
        found.setdefault(
            m.group("name"), Change(m.group("name"), _token(m.group("old")), _token(m.group("new")))
        )
    for m in _LOOSE_CHANGE.finditer(text):
        found.setdefault(m.group("name"), Change(m.group("name"), int(m.group("old")), int(m.group("new"))))
    for syntax in tuner_syntaxes():
        old: dict[str, Value] = {}
        new: dict[str, Value] = {}
        for m in syntax.diff.finditer(text):
            (old if m.group("sign") == "-" else new).setdefault(m.group("name"), _token(m.group("value")))
        for name, v in old.items():
            if name in new and new[name] != v:
                found.setdefault(name, Change(name, v, new[name]))
    return [c for c in found.values() if c.old != c.new]


def parse_changes(plan: str) -> list[Change]:
    """The changes a plan names: its `CHANGE:` lines, else its `NAME ... 32 -> 64` phrases."""
    strict = [
        Change(m.group("name"), _token(m.group("old")), _token(m.group("new")))
        for m in _CHANGE.finditer(plan)
    ]
    if strict:
        return list({c.name: c for c in reversed(strict)}.values())[::-1]
    loose = [
        Change(m.group("name"), int(m.group("old")), int(m.group("new")))
        for m in _LOOSE_CHANGE.finditer(plan)
    ]
    return list({c.name: c for c in reversed(loose)}.values())[::-1]


def parse_change(plan: str) -> Change | None:
    found = parse_changes(plan)
    return found[0] if found else None


# --- prompts ---------------------------------------------------------------------------------
