"""What an agent can read besides the tools: the problem specs and the per-language primers
as MCP resources, and the LLM roles' templates as MCP prompts, rendered for a problem as
AccelOpt's own planner, executor, fixer and summarizer get them (`prompts.render`).

    accelopt://problems/{suite}/{problem}   the problem in full (JSON: get_problem's facts without a profile)
    accelopt://primers/{language}           the language's and device's primer (Markdown)

A resource or prompt that does not exist is an `invalid params` error naming what there is.
"""

from __future__ import annotations

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from accelopt.catalog import LLM_ROLES, is_llm_role
from cli.commands.mcp_server import problems

PROBLEMS = "accelopt://problems/"
PRIMERS = "accelopt://primers/"


def _bad(message: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message)


def _languages() -> list[str]:
    from hardware_agents.languages import language_names

    return list(language_names())


def list_resources() -> list[types.Resource]:
    out = [
        types.Resource(
            uri=f"{PROBLEMS}{row.ref}",
            name=row.ref,
            description=f"{row.op_type} on {row.device} ({row.language}): the problem in full",
            mime_type="application/json",
        )
        for row in problems.list_problems(problems.ListProblemsArgs())
    ]
    out += [
        types.Resource(
            uri=f"{PRIMERS}{lang}",
            name=f"primer {lang}",
            description=f"the {lang} primer AccelOpt's roles read (language, device, profile glossary)",
            mime_type="text/markdown",
        )
        for lang in _languages()
    ]
    return out


def templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            uri_template=PROBLEMS + "{suite}/{problem}",
            name="problem",
            description="a problem of a suite, in full",
            mime_type="application/json",
        ),
        types.ResourceTemplate(
            uri_template=PRIMERS + "{language}", name="primer", description="a kernel language's primer"
        ),
    ]


def read(uri: str) -> types.ReadResourceResult:
    if uri.startswith(PROBLEMS):
        ref = uri[len(PROBLEMS) :]
        try:
            problem, device, language = problems.resolve(ref, None)
        except problems.UnknownError as e:
            raise _bad(str(e)) from None
        roof = problems.static_roofline(problem, device)
        detail = problems.problem_detail(ref, problem, device, language, roof, "")
        text = msgspec.json.encode(detail).decode()
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )
    if uri.startswith(PRIMERS):
        language = uri[len(PRIMERS) :]
        if language not in _languages():
            raise _bad(f"no primer for {language!r}; languages: {', '.join(_languages())}")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="text/markdown", text=problems.primer(language))
            ]
        )
    raise _bad(f"unknown resource {uri!r}: accelopt://problems/SUITE/PROBLEM or accelopt://primers/LANGUAGE")


def list_prompts() -> list[types.Prompt]:
    from actors.llm.role_table import ROLE_ROWS  # the rows' replies import litellm: when asked

    common = [
        types.PromptArgument(name="problem", description="SUITE/PROBLEM", required=True),
        types.PromptArgument(name="source", description="the kernel to start from (default: the baseline)"),
    ]
    return [
        types.Prompt(
            name=role,
            description=f"AccelOpt's {role} prompt for a problem, as its own {role} reads it",
            arguments=common
            + [
                types.PromptArgument(name=a.name, description=a.description, required=a.required)
                for a in row.args
            ],
        )
        for role, row in ROLE_ROWS.items()
    ]


def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    """`name`'s prompt for a problem, its context built by the role's row from the arguments
    (`RoleRow.from_args`) and rendered as the role's worker renders it."""
    from actors.llm.role_table import ROLE_ROWS, render
    from prompts import PromptError

    if not is_llm_role(name):
        raise _bad(f"unknown prompt {name!r}; prompts: {', '.join(LLM_ROLES)}")
    row = ROLE_ROWS[name]
    args = dict(arguments or {})
    missing = [a.name for a in row.args if a.required and not args.get(a.name)]
    if not args.get("problem"):
        missing.insert(0, "problem")
    if missing:
        raise _bad(f"prompt {name}: missing argument {', '.join(missing)}")
    try:
        problem, device, language = problems.resolve(args["problem"], None)
    except problems.UnknownError as e:
        raise _bad(str(e)) from None
    source = args.get("source") or problem.baseline.entry_file().content
    try:
        ctx = {"problem": problem, "source": source, "device": device, **row.from_args(args, source)}
        messages = render(name, language, **ctx)
    except PromptError as e:
        raise _bad(str(e)) from None
    return types.GetPromptResult(
        description=f"{name} for {args['problem']} on {device} ({language})",
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=m.content))
            for m in messages
        ],
    )
