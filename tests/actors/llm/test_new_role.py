"""The walk of docs/architecture.md, done: a new LLM role is three files, its catalog entry
(`accelopt/catalog.py`: its name, the request it answers and the answer it gives, its stage
and output allowance), its row (`actors/llm/role_table.py`: context builder, answer, the
offline tuner's reply) and its template (`prompts/<role>.txt`, for every language). In a copy
of the project's packages a `reviewer` is added that way and runs: its config key loads, its
prompt renders for every built-in language, `builtin/tuner` answers it (told the role, and
by its prompt's heading), a host builds its worker, and the worker, on a real nats-server,
answers a `ReviewRequested` with its call and a `KernelReviewed`. The checks of the role
table, the hosts and the event catalog pass. Each file alone is not enough: the catalog
entry without the row fails the table's check naming the role, the row without the
template fails to render naming the template."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = (
    "cli",
    "accelopt",
    "events",
    "actors",
    "hardware_agents",
    "memory_index",
    "replay",
    "prompts",
    "suites",
)

# --- file 1: accelopt/catalog.py -------------------------------------------------------------
ROLE_LITERAL = 'Role = Literal["planner", "executor", "fixer", "summarizer"'
STAGE_LITERAL = 'Stage = Literal["plan", "implement", "fix", "summarize"'
EVENTS = '''

class ReviewRequested(Event, tag=True, frozen=True):
    """Review a kernel before it is profiled (the walk of docs/architecture.md)."""

    subject: ClassVar[str] = "review.requested"
    author: ClassVar[Author] = "coordinator"

    problem: str
    iteration: int
    language: str
    device: str
    kernel_id: str
    source: str


class KernelReviewed(Event, tag=True, frozen=True):
    subject: ClassVar[str] = "kernel.reviewed"
    author: ClassVar[Author] = "role"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator", "fold"})

    problem: str
    iteration: int
    request_id: str
    kernel_id: str
    verdict: str
    llm_call_id: str
'''
EVENTS_ANCHOR = "\n\n# --- the LLM roles: the one table of them"
TABLE_ROW = '    LLMRole("summarizer", SummaryRequested, "summarize", max_tokens=8_192),\n'
NEW_ROW = '    LLMRole("reviewer", ReviewRequested, "review", max_tokens=4096),\n'

# --- file 2: actors/llm/role_table.py --------------------------------------------------------
ROW = """

def _verdict(e: Any, call: ev.LLMCallCompleted) -> ev.Event:
    for line in call.response.splitlines():
        if line.startswith("VERDICT:"):
            return ev.KernelReviewed(
                **envelope(e, ev.KernelReviewed),
                problem=e.problem,
                iteration=e.iteration,
                request_id=e.event_id,
                kernel_id=e.kernel_id,
                verdict=line.split(":", 1)[1].strip(),
                llm_call_id=call.event_id,
            )
    raise ReplyParseError("no verdict", call.response[:200])


REVIEWER = RoleRow(
    spec=ev.LLM_ROLE["reviewer"],
    context=lambda e, problem, seed: {"problem": problem, "source": e.source, "device": e.device},
    values=lambda ctx, lang: kernel_values(ctx, lang, "reviewer"),
    answer=lambda e, problem, call, started: _verdict(e, call),
    tuner=lambda system, user, sample: "The kernel keeps its interface.\\nVERDICT: ok\\n",
    heading="Kernel under review",
    from_args=lambda args, source: {},
)
"""
ROW_ANCHOR = "\n\n# --- the table ---"
ROWS_OLD = "(PLANNER, EXECUTOR, FIXER, SUMMARIZER)}"
ROWS_NEW = "(PLANNER, EXECUTOR, FIXER, SUMMARIZER, REVIEWER)}"
PARSING_OLD = "from actors.llm.parsing import extract_code, extract_plan, parse_insight\n"
PARSING_NEW = "from actors.llm.parsing import ReplyParseError, extract_code, extract_plan, parse_insight\n"

# --- file 3: prompts/reviewer.txt ------------------------------------------------------------
TEMPLATE = """=== system ===
You review kernels for the device `{{device}}` before they are profiled.

{{primer}}
=== user ===
Review the `{{entry}}` kernel below: answer with one line `VERDICT: ok` or `VERDICT: reject`, then why.

# Problem
{{problem}}

# Kernel under review
{{source}}
"""

CHECK = """
import asyncio, tempfile, time
from pathlib import Path

import suites
from accelopt import catalog as ev
from accelopt.config import build_config
from actors.llm.role_table import render, tuner_reply
from actors.roles.llm_roles import role_options
from actors.runtime.hosting import _Host, actor_class
from cli.commands.mcp_server.library import list_prompts
from events.log import EventLog
from events.server import NatsServer

cfg = build_config(overrides=["llm.roles.reviewer.temperature=0.5"])
assert cfg.llm.for_role("reviewer").max_tokens == 4096 and cfg.llm.for_role("reviewer").temperature == 0.5
problem = suites.get_problem("cpu_v2/silu")
source = problem.baseline.entry_file().content
for lang in ("c", "triton", "nki"):
    system, user = render("reviewer", lang, problem=problem, source=source, device="cpu")
    assert "# Kernel under review" in user.content and "{{" not in system.content + user.content
msgs = [{"role": m.role, "content": m.content} for m in render("reviewer", "c", problem=problem, source=source)]
assert tuner_reply(msgs, "reviewer") == tuner_reply(msgs) == "The kernel keeps its interface.\\nVERDICT: ok\\n"
assert actor_class("reviewer").role == "reviewer" and "reviewer" in [p.name for p in list_prompts()]


async def main(url):
    log = await EventLog.connect(url)
    target = ev.ProblemTarget(problem=problem, device="cpu", language="c", content_hash="h")
    started = ev.RunStarted(
        **ev.envelope(ev.RunStarted, "toy", ts=time.time()), config=cfg.to_dict(), seed=0, targets=[target]
    )
    request = ev.ReviewRequested(
        **ev.envelope(ev.ReviewRequested, "toy", "k1", ts=time.time()),
        problem=problem.name, iteration=1, language="c", device="cpu", kernel_id="k1", source=source,
    )
    await log.publish(started)
    await log.publish(request)
    host = _Host("reviewer", {
        "nats_url": url, "llm_config": cfg.llm, "options": role_options("reviewer", cfg.llm, fetch_timeout_s=0.2),
    })
    try:
        await asyncio.wait_for(host.run(until_idle_s=1.0), timeout=120)
    finally:
        await host.obj.close()
    events = await log.history("toy")
    await log.close()
    return events


server = NatsServer(Path(tempfile.mkdtemp()) / "nats")
server.start()
try:
    events = asyncio.run(main(server.url))
finally:
    server.kill()
[call] = [e for e in events if isinstance(e, ev.LLMCallCompleted)]
[review] = [e for e in events if isinstance(e, ev.KernelReviewed)]
assert call.role == "reviewer" and call.model == "builtin/tuner" and call.params["temperature"] == 0.5
assert call.params["max_tokens"] == 4096 and "# Kernel under review" in call.messages[1].content
assert review.verdict == "ok" and review.kernel_id == "k1" and review.llm_call_id == call.event_id
print("walked")
"""
CHECKS = [  # the role table's, the hosts' and the event catalog's
    "tests/test_role_table.py",
    "tests/test_layers.py",
    "tests/events/test_event_catalog.py",
    "-k",
    "one_row or branches or hosted_role or handled_or_declared_ignored or dispatch_tables_are "
    "or named_for_an_event_type or declares_its_subject",
]


def _copy(tmp: Path) -> Path:
    dst = tmp / "project"
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", dst)
    (dst / "tests").mkdir()
    for part in ("conftest.py", "test_role_table.py", "test_layers.py", "shared", "events"):
        src = ROOT / "tests" / part
        if src.is_dir():
            shutil.copytree(src, dst / "tests" / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dst / "tests" / part)
    return dst


def _patch(path: Path, anchor: str, text: str, *, before: bool = False, replace: bool = False) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, anchor
    new = text if replace else (text + anchor if before else anchor + text)
    path.write_text(source.replace(anchor, new))


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _run(cwd, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args)


def test_a_new_role_is_its_catalog_entry_its_row_and_its_template(tmp_path: Path) -> None:
    project = _copy(tmp_path)
    # file 1: the catalog entry (its name, stage, request, answer, allowance)
    catalog = project / "accelopt" / "catalog.py"
    _patch(catalog, ROLE_LITERAL, ROLE_LITERAL + ', "reviewer"', replace=True)
    _patch(catalog, STAGE_LITERAL, STAGE_LITERAL + ', "review"', replace=True)
    _patch(catalog, EVENTS_ANCHOR, EVENTS, before=True)
    _patch(catalog, TABLE_ROW, NEW_ROW)
    r = _pytest(project, *CHECKS)
    assert r.returncode == 1 and "reviewer" in r.stdout, r.stdout + r.stderr  # a role without its row
    # file 2: its row
    table = project / "actors" / "llm" / "role_table.py"
    _patch(table, ROW_ANCHOR, ROW, before=True)
    _patch(table, ROWS_OLD, ROWS_NEW, replace=True)
    _patch(table, PARSING_OLD, PARSING_NEW, replace=True)
    r = _run(project, "-c", CHECK)
    assert r.returncode == 1 and "'reviewer.c.txt' is missing" in r.stderr, r.stdout + r.stderr
    # file 3: its template, for every language
    (project / "prompts" / "reviewer.txt").write_text(TEMPLATE)
    r = _run(project, "-c", CHECK)
    assert r.returncode == 0 and "walked" in r.stdout, r.stdout + r.stderr
    r = _pytest(project, *CHECKS)
    assert r.returncode == 0, r.stdout + r.stderr  # 0: tests ran (none selected would be 5) and passed
