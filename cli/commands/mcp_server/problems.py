"""The problem tools' facts: the installed suites' problems as rows (`list_problems`) and one
problem in full (`problem_detail`): what AccelOpt's own planner reads of it (the problem
section, the language's primer), and the facts behind them as fields."""

from __future__ import annotations

import re
from typing import Any

import suites
from accelopt.kernel_id import kernel_id
from accelopt.problem import Problem, Tolerance
from cli.commands.mcp_server.records import (
    ListProblemsArgs,
    ProblemDetail,
    ProblemRow,
    RooflineFacts,
    TensorRow,
)
from hardware_agents.families import family_of, registered_kinds

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # a suite's or a problem's name


class UnknownError(LookupError):
    """An unknown problem, suite or device; the message is one line naming what there is."""


def _family(device: str) -> str:
    fam = family_of(device)
    return fam.name if fam is not None else ""


def list_problems(args: ListProblemsArgs) -> list[ProblemRow]:
    names = suites.list_suites()
    if args.suite is not None and args.suite not in names:
        raise UnknownError(f"unknown suite {args.suite!r}; suites: {', '.join(names)}")
    if args.device is not None and args.device not in registered_kinds():
        raise UnknownError(f"unknown device {args.device!r}; devices: {', '.join(registered_kinds())}")
    rows: list[ProblemRow] = []
    for suite in [args.suite] if args.suite else names:
        info = suites.suite_info(suite)
        family = _family(info.device)
        if args.device not in (None, info.device) or args.family not in (None, family):
            continue
        for problem in suites.load_suite(suite):
            if args.op_type not in (None, problem.definition.op_type):
                continue
            rows.append(
                ProblemRow(
                    ref=f"{suite}/{problem.name}",
                    suite=suite,
                    problem=problem.name,
                    op_type=problem.definition.op_type,
                    device=info.device,
                    family=family,
                    language=info.language,
                    axes=problem.axis_values(),
                )
            )
    return rows


def resolve(ref: str, device: str | None) -> tuple[Problem, str, str]:
    """The problem `ref` (SUITE/PROBLEM), the device it is judged on (default: its suite's)
    and its language; UnknownError for a problem, suite or device there is not, or a device
    that cannot run the problem's language."""
    from accelopt.config import ConfigError
    from suites.selection import check_language

    suite, _, name = ref.rpartition("/")
    # a registered suite's name, never a path: a folder the agent names would be a problem
    # whose reference (trusted, unsandboxed code) it wrote
    if not suite or not name or not _NAME.fullmatch(suite) or not _NAME.fullmatch(name):
        raise UnknownError(
            f"problem {ref!r}: expected SUITE/PROBLEM of a registered suite, e.g. cpu_v2/silu (list_problems)"
        )
    try:
        problem = suites.get_problem(ref)
        info = suites.suite_info(ref.rpartition("/")[0])
    except KeyError as e:
        raise UnknownError(str(e.args[0]) if e.args else str(e)) from None
    device = device or info.device
    if device not in registered_kinds():
        raise UnknownError(f"unknown device {device!r}; devices: {', '.join(registered_kinds())}")
    try:
        check_language(f"problem {ref!r}", problem, device)
    except ConfigError as e:
        raise UnknownError(str(e)) from None
    return problem, device, problem.baseline.spec.language


def _tensors(problem: Problem, outputs: bool) -> list[TensorRow]:
    specs = problem.definition.outputs if outputs else problem.definition.inputs
    shapes = problem.output_shapes() if outputs else problem.input_shapes()
    return [
        TensorRow(name=n, shape=list(shapes[n]) if shapes.get(n) is not None else None, dtype=s.dtype)  # type: ignore[arg-type]
        for n, s in specs.items()
    ]


def static_roofline(problem: Problem, device: str) -> dict[str, Any] | None:
    """The roofline facts where the device's peaks are cited (a GPU, a Trainium), without a
    worker; None where they are measured on this host (the CPU: the worker knows them)."""
    fam = family_of(device)
    spec = fam.kind(device).spec if fam is not None else None
    if spec is None:
        return None
    return roofline_facts(problem, spec)


def roofline_facts(problem: Problem, spec: Any) -> dict[str, Any]:
    """The problem's roofline on a device of `spec` (a DeviceSpec), as get_problem shows it."""
    from hardware_agents.pipeline.device_spec import roofline_terms, t_peak

    terms = roofline_terms(problem)
    seconds, bound = t_peak(problem, spec)
    return {
        "flops_matmul": terms.flops_matmul,
        "flops_vector": terms.flops_vector,
        "bytes_min": terms.bytes_min,
        "device_name": spec.name,
        "peak_bw_bytes_s": spec.peak_bw_bytes_s,
        "peak_matmul_flops": spec.peak_matmul_flops,
        "peak_vector_flops": spec.peak_vector_flops,
        "spec_source": spec.source,
        "spec_measured": spec.measured,
        "t_peak_ms": seconds * 1e3,
        "bound": bound,
    }


def problem_detail(
    ref: str, problem: Problem, device: str, language: str, roofline: dict[str, Any] | None, note: str
) -> ProblemDetail:
    from prompts.format import correctness_bar, format_problem, interface_lines

    d = problem.definition
    tol = d.x_tolerance or Tolerance()
    source = problem.baseline.entry_file().content
    return ProblemDetail(
        ref=ref,
        device=device,
        language=language,
        op_type=d.op_type,
        description=(d.description or "").strip(),
        axes=problem.axis_values(),
        inputs=_tensors(problem, outputs=False),
        outputs=_tensors(problem, outputs=True),
        tolerance={"rel_l2": tol.rel_l2, "atol": tol.atol, "rtol": tol.rtol},
        reference=d.reference,
        numpy_reference=d.x_numpy_reference or "",
        constraints=list(d.constraints),
        check_workloads=[dict(w.axes) for w in problem.check_workloads],
        entry_point=problem.baseline.spec.entry_point,
        baseline_source=source,
        baseline_kernel_id=kernel_id(problem.name, language, source),
        interface=interface_lines(problem, language),
        correctness_bar=correctness_bar(problem, language),
        problem_section=format_problem(problem, language),
        primer=primer(language),
        roofline=RooflineFacts(**roofline) if roofline is not None else None,
        roofline_note=note,
    )


def primer(language: str) -> str:
    from hardware_agents.languages import get_language
    from prompts import template_text

    lang = get_language(language)
    if lang.prompt_dir is not None:
        return (lang.prompt_dir / f"primer.{lang.name}.txt").read_text(encoding="utf-8").strip()
    return template_text(f"primer.{lang.name}.txt").strip()
