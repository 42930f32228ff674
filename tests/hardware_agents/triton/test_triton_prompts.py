"""Triton prompts show what the harness does: the production shapes, the smaller shapes the
kernel is also checked at, scalar values, the calling convention (destination-passing or
value-returning, as the problem's baseline says), and the Triton primer."""

from __future__ import annotations

import msgspec

from actors.llm.role_table import render


def _user(problem, role="planner", **kw):  # type: ignore[no-untyped-def]
    ctx = dict(
        problem=problem,
        source=problem.baseline.sources[0].content,
        profile=None,
        device="h100",
        seed=0,
        request_id="r",
        plan="**Use tl.dot**\nCHANGE: BLOCK_KV 32 -> 64",
        error_log="boom",
        status="incorrect",
    )
    ctx.update(kw)
    return render(role, "triton", **ctx)


def test_planner_shows_shapes_checks_scalars_and_convention(triton_suite):
    p = triton_suite["gqa_paged_decode_h32_kv8_d128_ps1"]
    system, user = _user(p)
    text = user.content
    assert "- batch_size = 32 [workload]" in text and "- num_kv_indices = 65536 [workload]" in text
    assert "k_cache: bfloat16[num_pages, page_size, num_kv_heads, head_dim] = [70000, 1, 8, 128]" in text
    assert "## Also checked at" in text and "small-1: batch_size = 2, num_pages = 64" in text
    assert "sm_scale: scalar float32 = 0.08838834764831845" in text
    assert (
        "Destination-passing style: `run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, lse)`"
        in text
    )
    assert "filled with NaN" in text and "Read the workload sizes from the tensors' shapes" in text
    assert "`tl.dot(a, b)`" in system.content and "How kernels are checked" in system.content
    assert "CUDA events" in system.content and "interpreter" in system.content


def test_value_returning_convention(triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    vr = msgspec.structs.replace(
        p,
        baseline=msgspec.structs.replace(
            p.baseline, spec=msgspec.structs.replace(p.baseline.spec, destination_passing_style=False)
        ),
    )
    text = _user(vr)[1].content
    assert "Value-returning: `run(hidden_states, weight)` returns the outputs (output)" in text


def test_executor_and_fixer_keep_the_interface(triton_suite):
    p = triton_suite["softmax_v128256"]
    ex = _user(p, "executor")[1].content
    assert "Keep the calling convention" in ex and "Also checked at" in ex and "```python" in ex
    fx = _user(p, "fixer")[1].content
    assert "`incorrect` means wrong values" in fx and "boom" in fx
