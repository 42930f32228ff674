"""Fixtures for the report tests: the real run they read (tests/replay/conftest.py, shared with
the dashboard's tests) and a small HTML tree parser (stdlib `html.parser`) that fails on
unbalanced tags. Synthetic runs come from tests/replay/conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

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
        return [
            [c.text().strip() for c in tr.find_all() if c.tag in ("td", "th")] for tr in self.find_all("tr")
        ]


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


@pytest.fixture(scope="session")
def real_run(shared_real_run):
    """The real run of tests/replay/conftest.py (rownorm of the headroom suite, 2 iterations),
    once it has ended."""
    outcome = shared_real_run.wait()
    assert not outcome.timed_out and outcome.view.completed is not None
    return outcome
