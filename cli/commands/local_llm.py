"""`accelopt local-llm prepare|serve`: a real small model on loopback (see actors/llm/local_llm.py)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "local-llm", help="prepare or serve SmolLM2-135M behind an OpenAI-compatible API on loopback"
    )
    p.add_argument(
        "action",
        choices=["prepare", "serve"],
        help="prepare: build and fetch once per machine; serve: run the server until Ctrl-C",
    )
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="cache directory (default $ACCELOPT_LOCAL_LLM_DIR or ~/.cache/accelopt/local-llm)",
    )
    p.add_argument("--port", type=int, default=None, help="serve: port on 127.0.0.1 (default: a free one)")
    p.add_argument("--threads", type=int, default=None, help="serve: CPU threads (default: all cores)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from actors.llm.local_llm import LITELLM_MODEL, LocalLLMError, LocalLLMServer, prepare

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        prepared = prepare(args.dir, say=say)
        if args.action == "prepare":
            print(f"ready: {prepared.model} served by {prepared.python}")
            return 0
        # SIGTERM unwinds like Ctrl-C, so the server (in its own session) is stopped too
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        with LocalLLMServer(prepared, port=args.port, threads=args.threads) as server:
            print(
                f"serving {LITELLM_MODEL} at {server.url} (log: {server.log_path}); try:\n"
                f"  accelopt run --problems silu,swiglu --model {LITELLM_MODEL} --api-base {server.url} "
                "--price 0 0 --set llm.default.max_tokens=768",
                flush=True,
            )
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(0.5)
            say(
                f"the server exited with {server.proc.returncode if server.proc else '?'}; see {server.log_path}"
            )
            return 1
    except LocalLLMError as e:
        say(f"local-llm: {e}")
        return 1
