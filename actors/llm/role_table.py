"""The LLM roles, one row each: what a role does with a request, beyond its catalog entry.

A role is its catalog entry (`accelopt.catalog.LLM_ROLE_TABLE`: its name, the request it
answers, the stage its failures are filed under, its output allowance), its template
(`prompts/<role>.<language>.txt`, or `prompts/<role>.txt` for every language) and its row
here, `RoleRow`:

- `context`: the render context of a request (its fields, the problem, the run's seed);
  `values`: the template's placeholders from a render context (the context builder);
- `answer`: the result event of a usable reply (raises `ReplyParseError`); `kernel_reply`:
  a reply cut at `max_tokens` is half a kernel, a failure, where a cut plan or insight is
  still usable text;
- `tuner`: the offline `builtin/tuner`'s reply to the role's prompt, and `heading`, the
  `# heading` of the user prompt by which the tuner tells the role when a call does not say;
- `sample_index`: which sample of its request a call is (N plans of a candidate differ by it);
- `args` and `from_args`: the role's prompt as an MCP client asks for it (`accelopt mcp`).

The worker that serves a role (`actors/roles/llm_roles.py`), its host
(`actors/runtime/hosting.py`), the tuner, the MCP server and the config read these rows and
branch on no role's name (tests/test_layers.py). Adding a role: docs/architecture.md.

Render contexts (keyword arguments of `render`):
- planner: problem: Problem, source: str, profile: Profile | None, insights:
  Sequence[RetrievedInsight] = (), device: str, seed: int, request_id: str
- executor: problem, source, plan: str, device
- fixer: problem, source, error_log: str, status: str, parent_source: str = "", device
- summarizer: problem: Problem | None, slow_source, fast_source, speedup: float,
  positive: bool = True, estimated: bool = False, device
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from accelopt import catalog as ev
from accelopt.problem import Problem
from accelopt.records import ChatMessage
from actors.llm import tuner
from actors.llm.parsing import extract_code, extract_plan, parse_insight
from hardware_agents.languages import KernelLanguage, find_language
from prompts import PromptError, language_of, render_template
from prompts.format import fence, format_problem, format_profile, format_speedup

Context = dict[str, Any]
TunerReply = Callable[[str, str, int], str]
"""The tuner's reply to a role's prompt: (system text, user text, sample index) -> reply."""


class PromptArg(NamedTuple):
    """An argument of a role's prompt as an MCP client gives it."""

    name: str
    description: str
    required: bool = True


def _first_sample(request: Any) -> int:
    return 0


@dataclass(frozen=True)
class RoleRow:
    """One LLM role (see the module doc)."""

    spec: ev.LLMRole
    context: Callable[[Any, Problem, int], Context]
    values: Callable[[Context, KernelLanguage], dict[str, str]]
    answer: Callable[[Any, Problem, ev.LLMCallCompleted, ev.RunStarted], ev.Event]
    tuner: TunerReply
    heading: str
    from_args: Callable[[Mapping[str, str], str], Context]
    args: tuple[PromptArg, ...] = ()
    kernel_reply: bool = False
    sample_index: Callable[[Any], int] = _first_sample

    @property
    def name(self) -> ev.Role:
        return self.spec.name


# --- what the rows share ---------------------------------------------------------------------


def need(ctx: Mapping[str, Any], role: str, *keys: str) -> None:
    """PromptError naming the keys of a render context that `role`'s prompt needs and lacks."""
    missing = [k for k in keys if k not in ctx]
    if missing:
        raise PromptError(f"render({role!r}): missing context {', '.join(missing)}")


def kernel_values(ctx: Mapping[str, Any], lang: KernelLanguage, role: str) -> dict[str, str]:
    """The placeholders of a prompt about one kernel of a problem: the problem and the kernel."""
    need(ctx, role, "problem", "source")
    return {"problem": format_problem(ctx["problem"], lang.name), "source": fence(ctx["source"], lang.fence)}


def envelope(request: ev.Event, kind: type[ev.Event]) -> ev.Envelope:
    """The envelope of a role's answer to `request` (`ev.envelope`)."""
    return ev.envelope(kind, request.run_id, request.event_id, ts=time.time(), cause=request)


def kernel(
    request: Any, problem: Problem, call: ev.LLMCallCompleted, started: ev.RunStarted, **lineage: Any
) -> ev.KernelProposed:
    """The kernel a reply proposes (its one code block, completed by its language)."""
    entry = problem.baseline.entry_symbol
    block = extract_code(call.response, entry=entry)
    lang = find_language(request.language)
    source = lang.complete_source(block.code, entry) if lang and lang.complete_source else block.code
    return ev.KernelProposed(
        **envelope(request, ev.KernelProposed),
        kernel_id=started.new_kernel_id(request.problem, request.language, source, request.event_id),
        problem=request.problem,
        iteration=request.iteration,
        request_id=request.event_id,
        language=request.language,
        source=source,
        llm_call_id=call.event_id,
        **lineage,
    )


# --- planner ---------------------------------------------------------------------------------


def _experiences(insights: Sequence[Any], device: str, language: str) -> str:
    if not insights:
        return ""
    from memory_index import format_for_prompt

    return "\n" + format_for_prompt(list(insights), device=device, language=language)


def _planner_values(ctx: Context, lang: KernelLanguage) -> dict[str, str]:
    v = kernel_values(ctx, lang, "planner")
    need(ctx, "planner", "seed", "request_id")
    v["profile"] = format_profile(
        ctx.get("profile"), seed=int(ctx["seed"]), request_id=str(ctx["request_id"])
    )
    v["experiences"] = _experiences(ctx.get("insights") or (), str(ctx.get("device", "cpu")), lang.name)
    return v


PLANNER = RoleRow(
    spec=ev.LLM_ROLE["planner"],
    context=lambda e, problem, seed: {
        "problem": problem,
        "source": e.candidate_source,
        "profile": e.candidate_profile,
        "insights": e.insights,
        "device": e.device,
        "seed": seed,
        "request_id": e.event_id,
    },
    values=_planner_values,
    answer=lambda e, problem, call, started: ev.PlanProposed(
        **envelope(e, ev.PlanProposed),
        problem=e.problem,
        iteration=e.iteration,
        candidate_id=e.candidate_id,
        request_id=e.event_id,
        plan=extract_plan(call.response),
        llm_call_id=call.event_id,
    ),
    tuner=tuner.plan_reply,
    heading="Profile",
    sample_index=lambda e: e.sample_index,
    from_args=lambda args, source: {"seed": 0, "request_id": "mcp", "profile": None, "insights": ()},
)


# --- executor --------------------------------------------------------------------------------


def _executor_values(ctx: Context, lang: KernelLanguage) -> dict[str, str]:
    v = kernel_values(ctx, lang, "executor")
    need(ctx, "executor", "plan")
    v["plan"] = fence(ctx["plan"], "text")
    return v


EXECUTOR = RoleRow(
    spec=ev.LLM_ROLE["executor"],
    context=lambda e, problem, seed: {
        "problem": problem,
        "source": e.candidate_source,
        "plan": e.plan,
        "device": e.device,
    },
    values=_executor_values,
    answer=lambda e, problem, call, started: kernel(
        e, problem, call, started, parent_id=e.candidate_id, plan_id=e.plan_id
    ),
    kernel_reply=True,
    tuner=lambda system, user, sample: tuner.execute_reply(user),
    heading="Optimization plan",
    sample_index=lambda e: e.sample_index,
    args=(PromptArg("plan", "the single-step plan to implement"),),
    from_args=lambda args, source: {"plan": args["plan"]},
)


# --- fixer -----------------------------------------------------------------------------------


def _fixer_values(ctx: Context, lang: KernelLanguage) -> dict[str, str]:
    v = kernel_values(ctx, lang, "fixer")
    need(ctx, "fixer", "error_log")
    v["status"] = str(ctx.get("status") or "failed")
    log = ctx["error_log"].strip() or "(the harness gave no log)"
    v["error_log"] = fence(log, "text")
    parent = (ctx.get("parent_source") or "").strip()
    v["parent_section"] = (
        (
            "\n# Last working version\nThe wrong code was derived from this version, which compiles and "
            "passes the checks. Keep the wrong code's optimization if you can fix it; otherwise fall "
            "back to this version.\n" + fence(parent, lang.fence) + "\n"
        )
        if parent
        else ""
    )
    return v


FIXER = RoleRow(
    spec=ev.LLM_ROLE["fixer"],
    context=lambda e, problem, seed: {
        "problem": problem,
        "source": e.source,
        "error_log": e.error_log,
        "status": e.status,
        "parent_source": e.parent_source,
        "device": e.device,
    },
    values=_fixer_values,
    answer=lambda e, problem, call, started: kernel(
        e,
        problem,
        call,
        started,
        parent_id=e.parent_id,  # the fix stands in for the broken kernel: the lineage its request carries
        plan_id=e.plan_id,
        fix_of=e.kernel_id,
        fix_round=e.fix_round,
    ),
    kernel_reply=True,
    tuner=lambda system, user, sample: tuner.fix_reply(user),
    heading="Wrong code",
    sample_index=lambda e: e.fix_round,
    args=(
        PromptArg("error_log", "what the judge said (a profile's log)"),
        PromptArg("status", "the failed profile's status, e.g. compile_error", required=False),
    ),
    from_args=lambda args, source: {"error_log": args["error_log"], "status": args.get("status") or "failed"},
)


# --- summarizer ------------------------------------------------------------------------------


def _summarizer_values(ctx: Context, lang: KernelLanguage) -> dict[str, str]:
    need(ctx, "summarizer", "slow_source", "fast_source", "speedup")
    problem: Problem | None = ctx.get("problem")
    return {
        "problem_name": problem.name if problem is not None else str(ctx.get("problem_name", "unknown")),
        "slow_source": fence(ctx["slow_source"], lang.fence),
        "fast_source": fence(ctx["fast_source"], lang.fence),
        "speedup": format_speedup(
            float(ctx["speedup"]),
            positive=bool(ctx.get("positive", True)),
            device=str(ctx.get("device", "cpu")),
            estimated=bool(ctx.get("estimated", False)),
        ),
    }


def _speedup_arg(args: Mapping[str, str], source: str) -> Context:
    try:
        speedup = float(args["speedup"])
    except ValueError:
        raise PromptError(f"prompt summarizer: speedup {args['speedup']!r} is not a number") from None
    return {"slow_source": source, "fast_source": args["fast_source"], "speedup": speedup}


def _insight(e: Any, call: ev.LLMCallCompleted) -> ev.InsightSummarized:
    insight = parse_insight(call.response)
    return ev.InsightSummarized(
        **envelope(e, ev.InsightSummarized),
        problem=e.problem,
        iteration=e.iteration,
        request_id=e.event_id,
        title=insight.title,
        text=insight.text,
        noop=insight.noop,
        llm_call_id=call.event_id,
    )


SUMMARIZER = RoleRow(
    spec=ev.LLM_ROLE["summarizer"],
    context=lambda e, problem, seed: {
        "problem": problem,
        "slow_source": e.slow_source,
        "fast_source": e.fast_source,
        "speedup": e.speedup,
        "positive": e.positive,
        "estimated": e.estimated,
        "device": e.device,
    },
    values=_summarizer_values,
    answer=lambda e, problem, call, started: _insight(e, call),
    tuner=lambda system, user, sample: tuner.summarize_reply(user),
    heading="Slow kernel",
    args=(
        PromptArg("fast_source", "the faster kernel (the slow one: the source argument or the baseline)"),
        PromptArg("speedup", "how much faster, e.g. 1.8"),
    ),
    from_args=_speedup_arg,
)


# --- the table -------------------------------------------------------------------------------

ROLE_ROWS: dict[ev.Role, RoleRow] = {r.name: r for r in (PLANNER, EXECUTOR, FIXER, SUMMARIZER)}
"""Every LLM role's row, in the catalog's order (tests/test_role_table.py)."""


def row_of(role: str) -> RoleRow:
    """The row of `role`; PromptError naming the roles for a name that is none."""
    if not ev.is_llm_role(role):
        raise PromptError(f"unknown role {role!r}; known: {', '.join(ev.LLM_ROLES)}")
    return ROLE_ROWS[role]


def render(role: str, language: str, **context: Any) -> list[ChatMessage]:
    """The system and user messages of `role` for a kernel in `language`, from its render
    context (see the module doc)."""
    row = row_of(role)
    lang = language_of(language)
    problem: Problem | None = context.get("problem")
    values = row.values(context, lang)
    return render_template(role, lang.name, values, problem=problem, device=str(context.get("device", "cpu")))


def tuner_reply(messages: Sequence[Mapping[str, Any]], role: str | None = None, sample_index: int = 0) -> str:
    """The tuner's reply to rendered agent messages (pure and deterministic): the reply of
    `role`'s row, or, where the call does not say, of the role whose heading the user prompt
    has (the rows looked at from the last; none has it: the first row's)."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") != "system")
    if not role:
        rows = list(ROLE_ROWS.values())
        row = next((r for r in reversed(rows) if tuner.has_heading(user, r.heading)), rows[0])
    elif ev.is_llm_role(role):
        row = ROLE_ROWS[role]
    else:
        raise ValueError(f"builtin/tuner: unknown role {role!r}")
    return row.tuner(system, user, sample_index)
