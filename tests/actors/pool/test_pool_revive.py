"""A warm pool's agent whose actor died for good (Ray's restarts spent: here killed with
`no_restart`, as the memory monitor's kills do once `max_restarts` is used up) is started
again by `AgentPool.revive`, and the next run is served by it. Real Ray, real nats-server,
the real CPU profiler; a campaign's driver calls `revive` every few seconds."""

from __future__ import annotations

import time

from accelopt import catalog as c
from actors.runtime.pool import AgentPool
from actors.runtime.session import SessionOptions, run_session
from events.logfile import read_events


def test_a_profiler_dead_for_good_is_started_again_and_serves(ray_session, run_config):
    import ray

    import suites

    cfg = run_config("problems=[matmul]", "search.iterations=1", "memory.enabled=false")
    pool = AgentPool(cfg, ["cpu"])
    with pool as url:
        assert pool.deployment is not None
        assert pool.revive() == []  # every agent serves: nothing to start
        (prof,) = [h for h in pool.deployment.hosts if h.name == "profiler-cpu-0"]
        ray.kill(prof.handle, no_restart=True)
        done, _ = ray.wait([prof.run_ref], timeout=60)
        assert done, "the killed profiler's run() did not end"
        said = pool.revive()
        assert len(said) == 1 and said[0].startswith("profiler-cpu-0: "), said
        (again,) = [h for h in pool.deployment.hosts if h.name == "profiler-cpu-0"]
        assert again.generation == 1 and again.handle is not prof.handle
        assert any(n.endswith("-r1") and "profiler-cpu-0" in n for n in ray.util.list_named_actors())
        assert pool.revive() == []  # the new one serves
        # dead again at once: left alone for a while (an agent that cannot start is retried
        # ever less often), then started again under the next name
        ray.kill(again.handle, no_restart=True)
        done, _ = ray.wait([again.run_ref], timeout=60)
        assert done and pool.revive() == [] and again.revive_after > time.monotonic()
        again.revive_after = 0.0  # (the backoff's 10 s, skipped)
        assert len(pool.revive()) == 1
        (third,) = [h for h in pool.deployment.hosts if h.name == "profiler-cpu-0"]
        assert third.generation == 2 and third.revive_after - time.monotonic() > 15  # 20 s now
        assert any(n.endswith("-r2") and "profiler-cpu-0" in n for n in ray.util.list_named_actors())
        outcome = run_session(
            cfg,
            [suites.get_problem("cpu/matmul")],
            SessionOptions(nats_url=url, start_workers=False, coordinator="local", timeout_s=600),
        )
    assert outcome.view.completed is not None and not outcome.timed_out
    events = read_events(outcome.run_dir / "log.aolog")
    profiled = [e for e in events if isinstance(e, c.KernelProfiled)]
    requested = [e for e in events if isinstance(e, c.ProfileRequested)]
    assert requested and len(profiled) == len(requested)  # every request answered by the new profiler
