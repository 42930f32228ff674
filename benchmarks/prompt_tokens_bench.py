"""Token counts of every role's rendered prompt (one problem per kernel language: the
samples of tests/prompts/prompt_samples.py, the same the golden tests check) against the
context window of the models the docs name, with litellm's tokenizer (`litellm.token_counter`)
and model info. A prompt fits when prompt tokens + the role's max_tokens (capped at the
model's output limit, as the gateway does) stay within the model's input context.

    .venv/bin/python benchmarks/prompt_tokens_bench.py   # prints a table, saves results/prompt_tokens_bench.json
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "shared"))
from testdirs import PROMPTS  # noqa: E402

sys.path.insert(0, str(PROMPTS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import save  # noqa: E402
from prompt_samples import SAMPLES, problem_for, render_all  # noqa: E402

import accelopt  # noqa: E402,F401  (offline defaults)
from accelopt.config import build_config  # noqa: E402
from actors.llm.gateway import max_output_tokens  # noqa: E402

MODELS = (
    "openai/gpt-5-mini",
    "claude-sonnet-4-5",
    "gpt-4o-mini",
    "groq/openai/gpt-oss-120b",
    "gemini/gemini-2.5-pro",
)
"""Models named in README.md and docs/llm-providers.md (gpt-oss-120b as a hosted provider names it)."""


def main() -> int:
    import litellm  # after accelopt's offline defaults

    llm = build_config().llm
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, *_ in SAMPLES:
            problem = problem_for(key, Path(tmp) / key)
            for role, msgs in render_all(key, problem).items():
                messages = [{"role": m.role, "content": m.content} for m in msgs]
                chars = sum(len(m.content) for m in msgs)
                for model in MODELS:
                    info = litellm.get_model_info(model)
                    context = info.get("max_input_tokens") or info.get("max_tokens")
                    tokens = int(litellm.token_counter(model=model, messages=messages))
                    limit = max_output_tokens(model)
                    out = (
                        min(llm.for_role(role).max_tokens, limit) if limit else llm.for_role(role).max_tokens
                    )
                    rows.append(
                        {
                            "language": key,
                            "role": role,
                            "model": model,
                            "chars": chars,
                            "prompt_tokens": tokens,
                            "max_tokens": out,
                            "context": context,
                            "fits": bool(context and tokens + out <= context),
                            "prompt_share_of_context": round(tokens / context, 4) if context else None,
                        }
                    )
    print(
        f"{'language':<9} {'role':<11} {'model':<26} {'chars':>7} {'tokens':>7} {'max_out':>8} {'context':>9}  fits"
    )
    for r in rows:
        print(
            f"{r['language']:<9} {r['role']:<11} {r['model']:<26} {r['chars']:>7} {r['prompt_tokens']:>7} "
            f"{r['max_tokens']:>8} {r['context'] or '-':>9}  {'yes' if r['fits'] else 'NO'}"
        )
    worst = max(rows, key=lambda r: r["prompt_tokens"])
    print(
        f"largest prompt: {worst['language']} {worst['role']}, {worst['prompt_tokens']} tokens ({worst['model']})"
    )
    save(
        "prompt_tokens_bench",
        {
            "models": list(MODELS),
            "rows": rows,
            "all_fit": all(r["fits"] for r in rows),
            "largest_prompt_tokens": worst["prompt_tokens"],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
