"""Helpers of the LLM-path tests: a small C problem, configs, an agent harness.

No network: real models are replaced by `scripted/<name>` (replies in the formats real
models give) or the offline `builtin/tuner`. Imported by the tests as `llm_helpers`
(tests/actors/llm/conftest.py puts this folder on sys.path).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from accelopt import catalog as c
from accelopt.config import LLMConfig, RoleLLM
from accelopt.problem import (
    AxisConst,
    AxisVar,
    Definition,
    Problem,
    TensorSpec,
    Tolerance,
    Workload,
    one_file_solution,
)
from accelopt.profile import LatencyStats, Profile
from actors.llm.gateway import LLMGateway
from actors.roles.llm_roles import ROLE_WORKERS, role_options
from events.log import EventLog

SCALE_ADD_C = """\
/* scale_add: out[i][j] = alpha * x[i][j] + y[i][j] over (M, N). */
#include <stddef.h>

#define TILE_J 32   /* columns per inner block */
#define UNROLL 4    /* inner unroll factor */
#define ALPHA 2.0f

void kernel(const float* x, const float* y, float* out) {
    #pragma omp parallel for
    for (int i = 0; i < M; i++)
        for (int j0 = 0; j0 < N; j0 += TILE_J)
            for (int j = j0; j < j0 + TILE_J && j < N; j++)
                out[(size_t)i * N + j] = ALPHA * x[(size_t)i * N + j] + y[(size_t)i * N + j];
}
"""

BROKEN_C = SCALE_ADD_C.replace("out[(size_t)i * N + j] =", "out[(size_t)i * N + j] = undefined_symbol +")


def scale_add_problem(name: str = "scale_add") -> Problem:
    d = Definition(
        name=name,
        op_type="elementwise",
        axes={"M": AxisVar(), "N": AxisConst(value=256)},
        inputs={
            "x": TensorSpec(shape=["M", "N"], dtype="float32"),
            "y": TensorSpec(shape=["M", "N"], dtype="float32"),
        },
        outputs={"out": TensorSpec(shape=["M", "N"], dtype="float32")},
        reference="import torch\n\ndef run(x, y):\n    return 2.0 * x + y\n",
        x_numpy_reference="def run(x, y):\n    return 2.0 * x + y\n",
        x_tolerance=Tolerance(rel_l2=3e-5, atol=1e-4, rtol=1e-3),
    )
    s = one_file_solution(name, SCALE_ADD_C, author="test")
    return Problem(definition=d, workload=Workload(uuid="w", axes={"M": 1024}), baseline=s)


def sample_profile() -> Profile:
    return Profile(
        status="passed",
        device="cpu",
        latency=LatencyStats(samples_ms=[2.0, 2.1, 2.2], median_ms=2.1, min_ms=2.0, max_ms=2.2, spread=0.05),
        t_peak_ms=0.42,
        peak_fraction=0.2,
        bound="memory",
        counters={"bytes_moved": 3.1e6, "threads": 2.0},
    )


def llm_config(
    model: str, *, retries: int = 0, timeout_s: float = 5.0, concurrency: int = 4, **kw: Any
) -> LLMConfig:
    return LLMConfig(
        default=RoleLLM(
            model=model,
            temperature=0.0,
            max_tokens=2048,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
        ),
        **kw,
    )


def envelope(run_id: str, kind: str, *key: object) -> dict[str, Any]:
    return {"event_id": c.derive_event_id(run_id, kind, *key), "run_id": run_id, "ts": time.time()}


def run_started(run_id: str, problem: Problem, seed: int = 7, config: dict | None = None) -> c.RunStarted:
    return c.RunStarted(
        **envelope(run_id, "RunStarted"),
        config=config or {},
        seed=seed,
        targets=[c.ProblemTarget(problem=problem, device="cpu", language="c", content_hash="h")],
    )


async def run_agent(
    nats_url: str,
    role: str,
    cfg: LLMConfig,
    run_id: str,
    problem: Problem,
    requests: Sequence[c.Event],
    *,
    gateway: LLMGateway | None = None,
    idle_s: float = 0.3,
    run_config: dict | None = None,
) -> list[c.Event]:
    """Publish RunStarted + `requests`, run the role's agent until idle, return the run's log."""
    elog = await EventLog.connect(nats_url)
    try:
        await elog.publish(run_started(run_id, problem, config=run_config))
        for r in requests:
            await elog.publish(r)
        agent = ROLE_WORKERS[role](
            nats_url,
            cfg,
            gateway=gateway or LLMGateway(cfg, backoff_base_s=0.01),
            options=role_options(role, cfg, fetch_timeout_s=0.2),
        )
        try:
            await asyncio.wait_for(agent.run(until_idle_s=idle_s), timeout=30)
        finally:
            await agent.close()
        return await elog.history(run_id)
    finally:
        await elog.close()


def of_type(events: Sequence[c.Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
