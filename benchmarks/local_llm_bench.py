"""The whole loop against a real model on loopback: SmolLM2-135M-Instruct behind llama-cpp-
python's OpenAI-compatible server (`accelopt local-llm`), as planner, executor, fixer and
summarizer on CPU problems.

Reports the server's token throughput (one idle request each for decoding and for prompt
processing, and the aggregate over the run's calls), the share of the model's replies that
parsed (a plan / a fenced kernel), compiled and passed, and the run's wall time.

Usage: python benchmarks/local_llm_bench.py [--problems silu,swiglu] [--iterations 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, save
from loop_bench import length, union

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev
from accelopt.config import LLMConfig, RoleLLM, build_config
from accelopt.records import ChatMessage, ModelPrice
from actors.llm.gateway import LLMGateway
from actors.llm.local_llm import LITELLM_MODEL, LocalLLMServer, prepare
from events.logfile import read_events
from suites.selection import load_problems

FAILED = ("compile_error", "runtime_error", "incorrect", "timeout")


async def idle_throughput(url: str) -> dict[str, float]:
    """Decode tokens/s (short prompt, 256 tokens out) and prompt tokens/s (long prompt, 1 out)."""
    price = {LITELLM_MODEL: ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source="config")}

    def gw(max_tokens: int) -> LLMGateway:
        return LLMGateway(
            LLMConfig(
                default=RoleLLM(
                    model=LITELLM_MODEL,
                    api_base=url,
                    temperature=0.0,
                    max_tokens=max_tokens,
                    concurrency=1,
                    timeout_s=600,
                    retries=0,
                ),
                prices=price,
            )
        )

    decode, prefill = [], []
    for i in range(3):
        story = [ChatMessage(role="user", content=f"Write a long story about a compiler, part {i}.")]
        c = (await gw(256).complete("planner", story, run_id="bench", request_id=f"d{i}"))[-1]
        decode.append(c.usage.completion_tokens / c.latency_s)
        text = " ".join(f"line {j} of part {i} says {j * 13 % 97}." for j in range(300))
        c = (
            await gw(1).complete(
                "planner", [ChatMessage(role="user", content=text)], run_id="bench", request_id=f"p{i}"
            )
        )[-1]
        prefill.append(c.usage.prompt_tokens / c.latency_s)
    return {"decode_tokens_per_s": median(decode), "prompt_tokens_per_s": median(prefill)}


def reply_shares(events: list[ev.Event]) -> dict[str, object]:
    plans_asked = [e for e in events if isinstance(e, ev.PlanRequested)]
    plan_ids = {e.event_id for e in plans_asked}
    plans_ok = sum(1 for e in events if isinstance(e, ev.PlanProposed) and e.request_id in plan_ids)
    kernel_asks = {e.event_id for e in events if isinstance(e, ev.ImplementationRequested | ev.FixRequested)}
    proposed = [e for e in events if isinstance(e, ev.KernelProposed) and e.request_id in kernel_asks]
    no_code = sum(1 for e in events if isinstance(e, ev.ProposalFailed) and e.request_id in kernel_asks)
    status = {e.kernel_id: e.profile.status for e in events if isinstance(e, ev.KernelProfiled)}
    statuses = [status.get(k.kernel_id, "missing") for k in proposed]
    compiled = sum(1 for s in statuses if s != "compile_error")
    passed = sum(1 for s in statuses if s == "passed")
    n = len(kernel_asks)
    return {
        "plan_replies": len(plan_ids),
        "plans_parsed": plans_ok,
        "plans_parsed_share": plans_ok / len(plan_ids) if plan_ids else None,
        "kernel_replies": n,
        "kernels_parsed": len(proposed),
        "kernel_replies_without_code": no_code,
        "kernels_compiled": compiled,
        "kernels_passed": passed,
        "parsed_share": len(proposed) / n if n else None,
        "compiled_share": compiled / n if n else None,
        "passed_share": passed / n if n else None,
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
    }


def call_figures(events: list[ev.Event]) -> dict[str, object]:
    calls = [e for e in events if isinstance(e, ev.LLMCallCompleted)]
    ok = [e for e in calls if e.error is None]
    busy = length(union([(e.ts - e.latency_s, e.ts) for e in calls if e.latency_s > 0]))
    completion = sum(e.usage.completion_tokens for e in ok)
    prompt = sum(e.usage.prompt_tokens for e in ok)
    by_role: dict[str, int] = {}
    for e in calls:
        by_role[e.role] = by_role.get(e.role, 0) + 1
    return {
        "calls": len(calls),
        "failed_calls": len(calls) - len(ok),
        "calls_by_role": by_role,
        "usage_from_server": all(not e.usage.estimated for e in ok),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "llm_busy_s": busy,
        "completion_tokens_per_busy_s": completion / busy if busy else None,
        "all_tokens_per_busy_s": (prompt + completion) / busy if busy else None,
        "truncated_replies": sum(1 for e in ok if e.finish_reason == "length"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="silu,swiglu")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()

    from actors.runtime.session import SessionOptions, run_session

    prepared = prepare(say=lambda m: print(m, flush=True))
    with LocalLLMServer(prepared) as server, tempfile.TemporaryDirectory(prefix="llm-bench-") as tmp:
        print(f"{LITELLM_MODEL} at {server.url} ({server.threads} threads)")
        idle = asyncio.run(idle_throughput(server.url))
        print(
            f"idle server: decode {idle['decode_tokens_per_s']:.0f} tokens/s, "
            f"prompt processing {idle['prompt_tokens_per_s']:.0f} tokens/s"
        )
        cfg = build_config(
            preset="quick",
            overrides=[
                f"root={tmp}/runs",
                f"memory.uri={tmp}/memory",
                f"problems=[{args.problems}]",
                f"search.iterations={args.iterations}",
                "search.fix_rounds=1",
                f"llm.default.model={LITELLM_MODEL}",
                f"llm.default.api_base={server.url}",
                f"llm.default.max_tokens={args.max_tokens}",
                f"llm.prices.{LITELLM_MODEL}.input_cost_per_token=0",
                f"llm.prices.{LITELLM_MODEL}.output_cost_per_token=0",
            ],
        )
        problems = load_problems(cfg)
        t0 = time.time()
        outcome = run_session(cfg, problems, SessionOptions(timeout_s=3600, log_level="ERROR"))
        wall = time.time() - t0
        events = read_events(outcome.run_dir / "log.aolog")
    calls = call_figures(events)
    shares = reply_shares(events)
    status = outcome.view.status
    print(
        f"run {outcome.run_id}: {status} in {wall:.0f} s wall ({args.problems}, {args.iterations} iteration(s))"
    )
    print(
        f"LLM calls: {calls['calls']} ({calls['failed_calls']} failed), {calls['prompt_tokens']} prompt + "
        f"{calls['completion_tokens']} completion tokens in {calls['llm_busy_s']:.0f} s busy = "
        f"{calls['completion_tokens_per_busy_s']:.0f} completion tokens/s; {calls['truncated_replies']} "
        "replies cut at max_tokens; usage from the server: " + str(calls["usage_from_server"])
    )
    print(
        f"plans: {shares['plans_parsed']}/{shares['plan_replies']} parsed; kernel replies: "
        f"{shares['kernels_parsed']}/{shares['kernel_replies']} parsed, {shares['kernels_compiled']} compiled, "
        f"{shares['kernels_passed']} passed {shares['statuses']}"
    )
    if not args.no_save:
        save(
            "local_llm_bench",
            {
                "model": LITELLM_MODEL,
                "problems": args.problems,
                "iterations": args.iterations,
                "max_tokens": args.max_tokens,
                "run_status": status,
                "run_wall_s": wall,
                "idle_server": idle,
                "calls": calls,
                "replies": shares,
            },
        )
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
