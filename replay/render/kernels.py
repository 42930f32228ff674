"""Report sections about one run's kernels: the best kernel's lineage with diffs, the search
tree, memory snapshots per iteration, and failures."""

from __future__ import annotations

from collections import Counter

from accelopt.profile import PROFILE_STATUSES
from replay.fold import RunView
from replay.lineage import LineageStep, TreeNode, best_path, search_tree
from replay.render import fmt, markdown
from replay.render.htmlkit import diff_stats, esc, source_diff, table
from replay.render.markdown import title as plan_title

STATUSES = (*PROFILE_STATUSES, "pending")


def _step_label(step: LineageStep) -> str:
    if step.kind == "fix":
        return f"fix round {step.kernel.fix_round}"
    return step.kind


def _step(step: LineageStep) -> str:
    k = step.kernel
    failed = "" if k.passed else " failed"
    facts = [f"iteration {k.iteration}", k.status]
    if k.latency_ms is not None:
        facts.append(fmt.ms(k.latency_ms))
        facts.append(f"{fmt.pct(k.peak_fraction)} of peak")
    if step.speedup is not None and step.kind != "baseline":
        facts.append(f"{fmt.speedup(step.speedup)} over baseline")
    if step.step_speedup is not None and step.kind != "baseline":
        facts.append(f"{fmt.speedup(step.step_speedup)} this step")
    if step.siblings:
        facts.append(f"{step.siblings} sibling{'s' if step.siblings != 1 else ''}")
    out = [
        f'<li class="step {step.kind}{failed}" data-kernel="{esc(k.kernel_id)}">',
        f'<div class="step-head"><span class="kind">{esc(_step_label(step))}</span>'
        f"<code>{esc(k.kernel_id[:12])}</code> \u00b7 {esc(' · '.join(facts))}</div>",
    ]
    prev = step.previous
    if step.kind == "fix" and prev is not None:
        log = (prev.profile.log if prev.profile else "").strip()
        out.append(
            f'<div class="note">repairs <code>{esc(prev.kernel_id[:12])}</code> ({esc(prev.status)})</div>'
        )
        if log:
            out.append(
                f'<details><summary>error log</summary><pre class="source">{esc(log[-1500:])}</pre></details>'
            )
    elif step.plan:
        out.append(f'<div class="plan md">{markdown.to_html(step.plan)}</div>')
    if prev is not None:
        added, removed = diff_stats(prev.source, k.source)
        out.append(
            f"<details><summary>diff vs <code>{esc(prev.kernel_id[:12])}</code> (+{added} \u2212{removed} "
            f"lines)</summary>"
            f"{source_diff(prev.source, k.source, name_before=prev.kernel_id[:12], name_after=k.kernel_id[:12])}"
            "</details>"
        )
    else:
        out.append(f'<details><summary>source</summary><pre class="source">{esc(k.source)}</pre></details>')
    out.append("</li>")
    return "".join(out)


def _tree_node(node: TreeNode, view: RunView) -> str:
    k = node.kernel
    classes = " ".join(c for c in ("on-path" if node.on_path else "", "in-beam" if node.in_beam else "") if c)
    what = f"fix {k.fix_round}" if k.fix_of else plan_title(view.plan_text(k.kernel_id)) or "baseline"
    figures = f"{fmt.ms(k.latency_ms)} \u00b7 {fmt.pct(k.peak_fraction)}" if k.passed else k.status
    st = "" if k.passed else ' class="st-failed"'
    out = [
        f'<li class="{classes}" data-kernel="{esc(k.kernel_id)}">'
        f'<span class="node"><code>{esc(k.kernel_id[:8])}</code> '
        f"it {k.iteration} \u00b7 <span{st}>{esc(figures)}</span> \u00b7 {esc(what)}</span>"
    ]
    if node.in_beam:
        out.append(' <span class="badge">beam</span>')
    if node.children:
        out.append("<ul>" + "".join(_tree_node(c, view) for c in node.children) + "</ul>")
    out.append("</li>")
    return "".join(out)


def lineage_section(view: RunView, label: str) -> str:
    out = []
    for name, p in sorted(view.problems.items()):
        best = view.kernels.get(p.best_id or "")
        out.append(f"<h4>{esc(name)}</h4>")
        if best is None:
            out.append('<p class="note">no best kernel yet</p>')
            continue
        steps = best_path(view, best.kernel_id)
        speedup = steps[-1].speedup if steps else None
        out.append(
            f"<p>best kernel <code>{esc(best.kernel_id[:12])}</code>: {esc(fmt.ms(best.latency_ms))}, "
            f"{esc(fmt.pct(best.peak_fraction))} of peak, {esc(fmt.speedup(speedup))} over the baseline, "
            f"found in iteration {best.iteration} after {max(len(steps) - 1, 0)} step(s)</p>"
        )
        out.append(f'<ol class="lineage" data-run="{esc(view.run_id or "")}" data-problem="{esc(name)}">')
        out += [_step(s) for s in steps]
        out.append("</ol>")
        out.append(
            f"<details><summary>best kernel source ({esc(best.language)})</summary>"
            f'<pre class="source">{esc(best.source)}</pre></details>'
        )
        roots, left_out = search_tree(view, name)
        more = f", {left_out} kernels off the beams left out" if left_out else ""
        out.append(
            f"<details><summary>search tree ({len(p.kernel_ids)} kernels{more}; best path in bold)</summary>"
            f'<ul class="tree" data-problem="{esc(name)}">'
            + "".join(_tree_node(r, view) for r in roots)
            + "</ul></details>"
        )
    return f'<div class="run-lineage" data-run="{esc(view.run_id or "")}"><h3>{esc(label)}</h3>{"".join(out)}</div>'


def memory_section(view: RunView, label: str) -> str:
    out = [f"<h3>{esc(label)}</h3>"]
    if not view.settings.memory.enabled:
        out.append(
            '<p class="note">memory retrieval off in this run (memory.enabled=false): the planners saw no '
            "insights</p>"
        )
    elif not view.memory_retrieved:
        out.append('<p class="note">no memory retrievals recorded</p>')
    if not view.memory_retrieved and not view.memory_entries:
        return "".join(out)
    rows = []
    for name, p in sorted(view.problems.items()):
        for it in sorted(p.memory):  # one row per iteration: what its candidates were planned with
            snap = view.memory_snapshot(name, it)
            entries = {r.entry_id: r for m in snap.retrieved for r in m.entries}
            foreign = sum(1 for r in entries.values() if r.problem != name)
            top = sorted(entries.values(), key=lambda r: -r.score)[:3]
            rows.append(
                [
                    name,
                    str(it),
                    str(len(snap.retrieved)),
                    str(len(entries)),
                    str(foreign),
                    str(len(snap.learnt)),
                    "; ".join(plan_title(r.title) for r in top),
                ]
            )
    if rows:
        out.append(
            table(
                [
                    "problem",
                    "iteration",
                    "candidates",
                    "insights retrieved",
                    "from other problems",
                    "learnt by this run before",
                    "top insights",
                ],
                rows,
                cls="memory",
                attrs=f'data-run="{esc(view.run_id or "")}"',
                numeric_from=1,
            )
        )
    if view.memory_entries:
        rows = []
        for m in view.memory_entries:
            e = m.entry
            rows.append(
                [
                    str(view.memory_entry_iteration.get(e.id, "-")),
                    e.problem,
                    plan_title(e.title),
                    fmt.speedup(e.speedup),
                    "speedup" if e.positive else "undo regression",
                ]
            )
        out.append("<h4>insights learnt</h4>")
        out.append(
            table(["iteration", "problem", "title", "speedup", "kind"], rows, cls="insights", numeric_from=9)
        )
    return "".join(out)


def failures_section(view: RunView, label: str) -> str:
    rows = []
    for name, p in sorted(view.problems.items()):
        counts = Counter(view.kernels[k].status for k in p.kernel_ids)
        fixes = [view.kernels[k] for k in p.kernel_ids if view.kernels[k].fix_of]
        rows.append(
            [
                name,
                *(str(counts.get(s, 0)) for s in STATUSES),
                str(len(fixes)),
                str(sum(1 for k in fixes if k.passed)),
            ]
        )
    out = [
        f"<h3>{esc(label)}</h3>",
        table(
            ["problem", *STATUSES, "fix attempts", "fixes passed"],
            rows,
            cls="statuses",
            attrs=f'data-run="{esc(view.run_id or "")}"',
        ),
    ]
    if view.failures:
        c = Counter((f.stage, f.reason) for f in view.failures)
        out.append("<h4>proposals that failed</h4>")
        out.append(
            table(
                ["stage", "reason", "count"],
                [[s, r, str(n)] for (s, r), n in c.most_common()],
                cls="proposal-failures",
                numeric_from=2,
            )
        )
    return "".join(out)
