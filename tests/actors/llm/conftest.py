"""Fixtures of the LLM-path tests (helpers live in `llm_helpers`, importable from here)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_llm import Script, ScriptItem, install_script, remove_script

_names = itertools.count()


@pytest.fixture
def scripted() -> Iterator[Callable[..., tuple[str, Script]]]:
    """`scripted(replies)` -> (model name, script); removed after the test."""
    installed: list[str] = []

    def make(replies: dict[str, Sequence[ScriptItem]] | Sequence[ScriptItem]) -> tuple[str, Script]:
        name = f"t{next(_names)}"
        script = Script(replies if isinstance(replies, dict) else {"*": list(replies)})
        installed.append(name)
        return install_script(name, script), script

    yield make
    for name in installed:
        remove_script(name)


@pytest.fixture(scope="session", autouse=True)
def _litellm_warm() -> None:
    """litellm imports lazily on its first call (~1 s, blocking the loop): pay it once here so
    timing assertions measure the gateway, not the import."""
    import asyncio

    from llm_helpers import llm_config

    from accelopt.records import ChatMessage
    from actors.llm.gateway import LLMGateway

    gw = LLMGateway(llm_config("builtin/tuner"))
    asyncio.run(
        gw.complete(
            "summarizer", [ChatMessage(role="user", content="No kernels")], run_id="w", request_id="w"
        )
    )
