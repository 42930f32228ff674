"""A loopback HTTP server speaking the OpenAI chat-completions wire format with a fixed
answer: the one part of the LLM path that cannot exist here is a provider rejecting a key
(or answering at all without a model), so this stands in for it. Everything in front of it
(litellm, the gateway, the agents, the coordinator) is the real code."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OpenAIStub:
    """`status` 401 answers every request like OpenAI does for a bad key; 200 answers `text`."""

    def __init__(self, *, status: int = 401, text: str = "OK") -> None:
        self.status = status
        self.text = text
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                stub.requests.append(json.loads(body or b"{}"))
                if stub.status == 200:
                    payload = {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "stub",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": stub.text},
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                    }
                else:
                    payload = {
                        "error": {
                            "message": "Incorrect API key provided: sk-wr***ng.",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": "invalid_api_key",
                        }
                    }
                data = json.dumps(payload).encode()
                self.send_response(stub.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
