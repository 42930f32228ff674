"""The device figure (graph replays) cannot be bought with the eager calls' time: a wrapper
that, while captured, only notes which output buffer belongs to which input set (its graph
records no work) and then, in the eager call on that input set, also writes the replay's
outputs, has replays that do nothing and outputs that check out. The clock is honest (the
work is real, only in the eager calls) and each list of calls is even, so only the order of
the calls can keep the replays from being fed by the eager calls."""

from __future__ import annotations

from test_triton_device_timeline import DEVICE_MS, HONEST, LAUNCH, TRITON_KERNEL, graph_agent  # noqa: F401
from triton_helpers import solution

FEEDING = (
    "    if _SIM.capturing is not None:\n"
    "        _GRAPH_OUT[hidden_states.data_ptr()] = output\n"
    + LAUNCH.replace(
        "    _rmsnorm[(hidden_states.shape[0],)]", "        _rmsnorm[(1,)]"
    )  # one row: a token launch
    + "        return\n"
    + LAUNCH
    + HONEST
    + "    fed = _GRAPH_OUT.get(hidden_states.data_ptr())\n"
    "    if fed is not None:\n"
    + LAUNCH.replace("    _rmsnorm", "        _rmsnorm").replace(", output,", ", fed,")
    + HONEST.replace("    ", "        ", 1)
)


def test_eager_calls_cannot_do_the_replays_work(graph_agent, triton_suite):  # noqa: F811
    p = triton_suite["rmsnorm_h4096"]
    prelude = "_SIM = getattr(__import__('hardware_agents.triton.cuda_shim', fromlist=['_']), 'SIM')\n_GRAPH_OUT = {}\n"
    src = TRITON_KERNEL.format(prelude=prelude, body=FEEDING)
    prof = graph_agent.profile(p, solution(p, src, name="feeds_its_replays"))
    # before: passed, its device figure 8.9-10.1 ms against the 20 ms (DEVICE_MS) of device
    # time a call it really has; now its replays' outputs are judged as the replays left them
    assert prof.status == "incorrect", (prof.status, prof.counters.get("device_latency_ms"), DEVICE_MS)
    assert "(graph replay)" in prof.log, prof.log
