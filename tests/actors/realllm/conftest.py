"""Fixtures of the real-LLM tests: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible
server on a loopback port (actors/llm/local_llm.py). Nothing is scripted or mocked here: the
gateway and the agents talk HTTP to a real model through litellm.

`make test` prepares the server once per machine (`accelopt local-llm prepare`) before
pytest runs; a bare `pytest` prepares it here on first use (a ~5 min build).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `real_helpers`

from actors.llm.local_llm import LocalLLMServer, Prepared, prepare


@pytest.fixture(scope="session")
def prepared_llm() -> Prepared:
    return prepare()


@pytest.fixture(scope="session")
def llm_server(prepared_llm: Prepared) -> Iterator[LocalLLMServer]:
    """One server for the tests that only need a model to answer."""
    with LocalLLMServer(prepared_llm, threads=2) as server:
        yield server


@pytest.fixture
def own_llm_server(prepared_llm: Prepared) -> Iterator[Callable[..., LocalLLMServer]]:
    """`own_llm_server(port=None)`: a started server of this test's own (to kill, slow down
    or leave busy without disturbing other tests); all are stopped afterwards."""
    servers: list[LocalLLMServer] = []

    def start(port: int | None = None) -> LocalLLMServer:
        server = LocalLLMServer(prepared_llm, port=port, threads=2)
        servers.append(server)
        return server.start()

    yield start
    for s in servers:
        s.kill()
