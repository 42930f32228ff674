"""Fixtures for the report tests: one real run (real NATS, Ray, compiled CPU kernels, the
offline `builtin/tuner` model) and a small HTML tree parser (stdlib `html.parser`) that
fails on unbalanced tags. Synthetic runs come from tests/replay/conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest
from testdirs import HEADROOM_SUITE

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    parent: Node | None = None
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        out = []
        for n in self.iter():
            if tag is not None and n.tag != tag:
                continue
            if cls is not None and cls not in n.attrs.get("class", "").split():
                continue
            if any(n.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        found = self.find_all(tag, cls, **attrs)
        assert found, f"no <{tag} class={cls} {attrs}> found"
        return found[0]

    def rows(self) -> list[list[str]]:
        """A table's cell texts, header row first."""
        return [[c.text().strip() for c in tr.find_all() if c.tag in ("td", "th")] for tr in self.find_all("tr")]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.cur = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag: str) -> None:
        assert self.cur.tag == tag, f"</{tag}> closes <{self.cur.tag}>"
        assert self.cur.parent is not None
        self.cur = self.cur.parent

    def handle_data(self, data: str) -> None:
        self.cur.children.append(data)


def parse(html: str) -> Node:
    b = _TreeBuilder()
    b.feed(html)
    b.close()
    assert b.cur is b.root, f"unclosed <{b.cur.tag}>"
    return b.root


@pytest.fixture(scope="session")
def parse_html() -> Callable[[str], Node]:
    return parse


# The recorded run the report tests read: a test-only problem whose tunable has a large real
# effect (tests/accelopt/loop/headroom_suite), so the tuner surely improves it within two iterations;
# on the CPU suite an "improvement" within noise may or may not happen.
REAL_SUITE = str(HEADROOM_SUITE)
REAL_PROBLEM = "rownorm"


@pytest.fixture(scope="session")
def real_run(ray_session, tmp_path_factory):
    """A real `accelopt run` of the headroom suite's rownorm, 2 iterations, offline tuner."""
    import suites
    from accelopt.config import build_config
    from actors.session import run_session

    tmp = tmp_path_factory.mktemp("report-run")
    cfg = build_config(preset="quick", overrides=[
        f"root={tmp / 'runs'}", f"memory.uri={tmp / 'memory'}", f"suite={REAL_SUITE}", f"problems=[{REAL_PROBLEM}]",
        "search.iterations=2", "search.plans_per_candidate=2", "profiling.timeout_s=60",
    ])
    outcome = run_session(cfg, [suites.get_problem(f"{REAL_SUITE}/{REAL_PROBLEM}")], timeout_s=300)
    assert not outcome.timed_out and outcome.view.completed is not None
    return outcome
