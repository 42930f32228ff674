"""One profiler host serves many simulated profiles at once (`devices.sim.concurrency`),
while a real device kind keeps one kernel at a time whatever it is asked. Real nats-server
(JetStream), the real Profiler loop; no Ray (the host is the object Ray would run)."""

from __future__ import annotations

import asyncio
import time

from accelopt import catalog as c
from accelopt.config import build_config
from actors.roles.profiler import Profiler
from actors.runtime.deployment import profiler_options
from events.log import EventLog
from hardware_agents.sim.suite import write_suite

N = 12


def requests(run_id: str, problem) -> list[c.ProfileRequested]:
    out = []
    for i in range(N):
        src = problem.baseline.sources[0].content + f"\n/* v{i} */\n"
        kid = c.derive_event_id(run_id, "Kernel", i)
        out.append(
            c.ProfileRequested(
                event_id=c.derive_event_id(run_id, "ProfileRequested", kid),
                run_id=run_id,
                ts=time.time(),
                kernel_id=kid,
                problem=problem.name,
                device="sim",
                language="c",
                source=src,
            )
        )
    return out


def test_one_host_runs_many_simulated_profiles_at_once(shared_nats, tmp_path):
    import suites

    problem = suites.load_suite(str(write_suite(tmp_path, 1)))[0]
    run_id = f"simhost-{time.time_ns()}"
    cfg = build_config(overrides=["devices.sim.concurrency=8"])

    async def go():
        elog = await EventLog.connect(shared_nats.url)
        started = c.RunStarted(
            event_id=c.derive_event_id(run_id, "RunStarted"),
            run_id=run_id,
            ts=time.time(),
            config=cfg.to_dict(),
            seed=0,
            targets=[
                c.ProblemTarget(
                    problem=problem, device="sim", language="c", content_hash=problem.content_hash()
                )
            ],
        )
        await elog.publish(started)
        for r in requests(run_id, problem):
            await elog.publish(r)
        host = Profiler(
            shared_nats.url,
            "sim",
            agent_options={"allow": True, "profile_s": 0.3},
            options=profiler_options("sim", cfg),
            worker_name="simhost",
        )
        stats = await host.run(until_idle_s=2.0)
        got = [e for e in await elog.history(run_id) if isinstance(e, c.KernelProfiled)]
        agent = host._agent
        await host.close()
        await elog.close()
        return stats, got, agent

    stats, got, agent = asyncio.run(go())
    assert stats.handled == N and stats.failed == 0
    assert sorted(e.kernel_id for e in got) == sorted(r.kernel_id for r in requests(run_id, problem))
    assert agent.max_in_flight == 8  # the configured concurrency, all in one process


def test_a_real_device_keeps_one_kernel_at_a_time(shared_nats):
    cfg = build_config(overrides=["devices.cpu.concurrency=4"])

    async def go():
        host = Profiler(shared_nats.url, "cpu", options=profiler_options("cpu", cfg), worker_name="cpuhost")
        await host.connect()
        n = host.options.concurrency
        await host.close()
        return n

    assert profiler_options("cpu", cfg).concurrency == 4
    assert asyncio.run(go()) == 1
