"""The lineage of a kernel as report material: the path from the baseline to it, one step
per kernel (the plan it implements, fix rounds, latency, % of peak, speedups), and the
search tree of a problem (every kernel under its parent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from replay.fold import KernelView, RunView

StepKind = Literal["baseline", "plan", "fix"]


@dataclass
class LineageStep:
    kernel: KernelView
    kind: StepKind
    previous: KernelView | None  # the step before (the diff's left side)
    plan: str | None  # the plan text the kernel implements (a fix implements its broken kernel's)
    speedup: float | None  # over the baseline
    step_speedup: float | None  # over the last passing kernel before it on the path
    siblings: int  # other kernels proposed from the same parent in the same iteration


def plan_title(plan: str | None) -> str:
    """The plan's first non-empty line without markdown emphasis."""
    if not plan:
        return ""
    for line in plan.splitlines():
        line = line.strip().strip("*#").strip()
        if line:
            return line[:160]
    return ""


def children_index(view: RunView, problem: str) -> dict[str | None, list[KernelView]]:
    """Kernels by the kernel they were derived from (fixes under the kernel they repair)."""
    out: dict[str | None, list[KernelView]] = {}
    p = view.problems.get(problem)
    for kid in p.kernel_ids if p is not None else []:
        k = view.kernels[kid]
        out.setdefault(k.fix_of or k.parent_id, []).append(k)
    return out


def best_path(view: RunView, kernel_id: str) -> list[LineageStep]:
    chain = view.lineage(kernel_id)
    if not chain:
        return []
    base_ms = chain[0].latency_ms if chain[0].parent_id is None and chain[0].fix_of is None else None
    kids = children_index(view, chain[0].problem)
    steps: list[LineageStep] = []
    last_ok: KernelView | None = None
    for i, k in enumerate(chain):
        kind: StepKind = "fix" if k.fix_of else ("baseline" if i == 0 and k.parent_id is None else "plan")
        lat = k.latency_ms
        siblings = 0
        if kind == "plan":
            siblings = (
                sum(1 for s in kids.get(k.parent_id, []) if s.iteration == k.iteration and not s.fix_of) - 1
            )
        steps.append(
            LineageStep(
                kernel=k,
                kind=kind,
                previous=chain[i - 1] if i else None,
                plan=view.plan_text(k.kernel_id),
                speedup=base_ms / lat if base_ms and lat else None,
                step_speedup=last_ok.latency_ms / lat
                if last_ok is not None and last_ok.latency_ms and lat
                else None,
                siblings=max(siblings, 0),
            )
        )
        if lat is not None:
            last_ok = k
    return steps


@dataclass
class TreeNode:
    kernel: KernelView
    children: list[TreeNode] = field(default_factory=list)
    on_path: bool = False
    in_beam: bool = False


def search_tree(view: RunView, problem: str, *, limit: int = 400) -> tuple[list[TreeNode], int]:
    """The problem's kernels as a forest under the baseline; the best kernel's path marked.

    Past `limit` kernels only those on the best path or ever in a beam (and the fixes of
    those) are kept; returns the roots and how many kernels were left out.
    """
    p = view.problems.get(problem)
    if p is None:
        return [], 0
    path = {k.kernel_id for k in view.lineage(p.best_id or "")}
    beams = {kid for members in p.beams.values() for kid in members}
    ids = p.kernel_ids
    keep = set(ids)
    if len(ids) > limit:
        keep = path | beams | ({p.baseline_id} if p.baseline_id else set())
        for kid in list(keep):  # fix chains of kept kernels
            keep.update(k.kernel_id for k in view.fix_chain(kid))
    nodes = {
        kid: TreeNode(view.kernels[kid], on_path=kid in path, in_beam=kid in beams)
        for kid in ids
        if kid in keep
    }
    roots: list[TreeNode] = []
    for kid in ids:
        node = nodes.get(kid)
        if node is None:
            continue
        k = node.kernel
        up = nodes.get(k.fix_of or k.parent_id or "")
        (up.children if up is not None else roots).append(node)
    return roots, len(ids) - len(nodes)
