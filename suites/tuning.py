"""Tuning spaces declared in kernel sources: `// tune: NAME in {v1,v2,...} -- meaning`.

A kernel of the `cpu_v2` suite declares each tunable constant on the line right above its
`#define NAME value` (suites/cpu_v2/README.md):

    // tune: TILE_N in {16,32,64,128,256,512} -- columns of out per cache block
    #define TILE_N 512

`parse_space(source)` returns the declared knobs in source order, `set_values(source,
{NAME: value})` rewrites the `#define`s (rejecting undeclared names and illegal values), and
`sample_points` draws distinct random points of the space, deterministic in the seed.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping

import msgspec

_TUNE = re.compile(
    r"^[ \t]*//[ \t]*tune:[ \t]*(?P<name>[A-Za-z_]\w*)[ \t]+in[ \t]*\{(?P<values>[^}]*)\}"
    r"(?:[ \t]*--[ \t]*(?P<doc>[^\n]*))?\n[ \t]*#[ \t]*define[ \t]+(?P<dname>[A-Za-z_]\w*)[ \t]+(?P<value>\d+)\b",
    re.MULTILINE,
)


class SpaceError(ValueError):
    """A malformed `// tune:` declaration or an illegal point."""


class Knob(msgspec.Struct, frozen=True):
    name: str
    values: tuple[int, ...]  # legal values, ascending
    default: int  # the value the source ships with
    doc: str = ""


def parse_space(source: str) -> list[Knob]:
    """The `// tune:` knobs of a kernel, in source order."""
    knobs: list[Knob] = []
    for m in _TUNE.finditer(source):
        name = m.group("name")
        if m.group("dname") != name:
            raise SpaceError(
                f"`// tune: {name}` is followed by `#define {m.group('dname')}`, not `#define {name}`"
            )
        try:
            values = tuple(sorted({int(v) for v in m.group("values").split(",") if v.strip()}))
        except ValueError as e:
            raise SpaceError(f"`// tune: {name}`: values must be integers ({e})") from e
        if not values or values[0] < 1:
            raise SpaceError(f"`// tune: {name}`: needs at least one value, all >= 1")
        default = int(m.group("value"))
        if default not in values:
            raise SpaceError(f"`#define {name} {default}` is not among its legal values {values}")
        if any(k.name == name for k in knobs):
            raise SpaceError(f"`// tune: {name}` is declared twice")
        knobs.append(Knob(name=name, values=values, default=default, doc=(m.group("doc") or "").strip()))
    return knobs


def space_size(knobs: list[Knob]) -> int:
    return math.prod(len(k.values) for k in knobs)


def default_point(knobs: list[Knob]) -> dict[str, int]:
    return {k.name: k.default for k in knobs}


def set_values(source: str, point: Mapping[str, int]) -> str:
    """`source` with the declared `#define`s set to `point` (others unchanged)."""
    knobs = {k.name: k for k in parse_space(source)}
    for name, value in point.items():
        if name not in knobs:
            raise SpaceError(f"{name} is not a declared tunable; tunables: {sorted(knobs)}")
        if value not in knobs[name].values:
            raise SpaceError(f"{name}={value} is not legal; legal values: {knobs[name].values}")

    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in point:
            return m.group(0)
        s, e = m.span("value")
        return m.group(0)[: s - m.start()] + str(point[name]) + m.group(0)[e - m.start() :]

    return _TUNE.sub(repl, source)


def sample_points(knobs: list[Knob], n: int, seed: int = 0) -> list[dict[str, int]]:
    """Up to `n` distinct random points (the whole space, in random order, if it is that small)."""
    rng = random.Random(seed)
    total = space_size(knobs)
    if total <= n:
        points = [dict(zip([k.name for k in knobs], combo, strict=True)) for combo in _product(knobs)]
        rng.shuffle(points)
        return points
    seen: set[tuple[int, ...]] = set()
    out: list[dict[str, int]] = []
    while len(out) < n:
        combo = tuple(rng.choice(k.values) for k in knobs)
        if combo not in seen:
            seen.add(combo)
            out.append(dict(zip([k.name for k in knobs], combo, strict=True)))
    return out


def _product(knobs: list[Knob]) -> list[tuple[int, ...]]:
    combos: list[tuple[int, ...]] = [()]
    for k in knobs:
        combos = [(*c, v) for c in combos for v in k.values]
    return combos


__all__ = ["Knob", "SpaceError", "default_point", "parse_space", "sample_points", "set_values", "space_size"]
