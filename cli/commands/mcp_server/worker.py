"""The judge's child process: one device's hardware agent, kept warm, answering requests from
`judge.py` one at a time over stdin/stdout (length-prefixed msgpack frames).

It runs a kernel exactly as a run's profiler does (`actors.roles.profiler.kernel_solution`,
the agent's `profile` and its sandbox), in a process of its own so that the server can stop a
profile by killing it (cancellation, a judge that does not answer) and stays up whatever a
kernel does. The sandboxed kernel's process dies with this one (PR_SET_PDEATHSIG).

    python -m cli.commands.mcp_server.worker DEVICE
"""

from __future__ import annotations

import os
import struct
import sys
from typing import Any, BinaryIO

import msgspec

_LEN = struct.Struct(">I")


def read_frame(fh: BinaryIO) -> Any | None:
    head = fh.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    return msgspec.msgpack.decode(fh.read(n))


def frame(value: Any) -> bytes:
    data = msgspec.msgpack.encode(value)
    return _LEN.pack(len(data)) + data


def _one_line(e: BaseException) -> str:
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return "; ".join(ln.strip() for ln in text.splitlines() if ln.strip()) or type(e).__name__


def _spec(agent: Any, problem: Any) -> dict[str, Any]:
    from cli.commands.mcp_server.problems import roofline_facts

    return roofline_facts(problem, agent.spec)


def _profile(agent: Any, problem: Any, req: dict[str, Any]) -> dict[str, Any]:
    from actors.roles.profiler import kernel_solution

    solution = kernel_solution(
        problem.name, req["kernel_id"], req["language"], req["source"], problem.baseline
    )
    prof = agent.profile(problem, solution, seeds=tuple(req["seeds"]), timeout_s=req.get("timeout_s"))
    return {"profile": msgspec.to_builtins(prof)}


class _Keeping:
    """The agent, keeping every profile it gives (a compare's rounds go into the session log)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.profiles: list[tuple[str, Any]] = []

    def profile(self, problem: Any, solution: Any, **kw: Any) -> Any:
        prof = self.agent.profile(problem, solution, **kw)
        self.profiles.append((solution.name, prof))
        return prof


def _compare(agent: Any, problem: Any, req: dict[str, Any], out: BinaryIO) -> dict[str, Any]:
    """`accelopt remeasure`'s interleaved rounds over the two kernels (slow first)."""
    from actors.runtime.kernel_remeasure import measure_interleaved

    def progress(text: str) -> None:
        out.write(frame({"progress": text}))
        out.flush()

    keeping = _Keeping(agent)
    kernels = [(k["kernel_id"], req["language"], k["source"]) for k in req["kernels"]]
    measures = measure_interleaved(
        keeping,
        problem,
        kernels,
        device=agent.kind,
        rounds=req["rounds"],
        base_seed=req["base_seed"],
        timeout_s=req.get("timeout_s"),
        progress=progress,
    )
    names = {f"{problem.name}_{kid[:12]}": kid for kid, _, _ in kernels}
    return {
        "measures": [msgspec.to_builtins(m) for m in measures],
        "profiles": [[names.get(name, ""), msgspec.to_builtins(p)] for name, p in keeping.profiles],
    }


def serve(device: str, inp: BinaryIO, out: BinaryIO) -> int:
    import suites
    from accelopt.problem import ProblemFileError
    from hardware_agents.families import get_agent

    try:
        agent = get_agent(device)
    except Exception as e:  # an unknown kind, a device this host lacks: said once, then gone
        out.write(frame({"error": f"device {device!r} is not usable here: {_one_line(e)}"}))
        out.flush()
        return 2
    out.write(frame({"ready": device}))
    out.flush()
    try:
        while (req := read_frame(inp)) is not None:
            try:
                problem = suites.get_problem(req["problem"])
                if req["op"] == "spec":
                    reply = _spec(agent, problem)
                elif req["op"] == "compare":
                    reply = _compare(agent, problem, req, out)
                else:
                    reply = _profile(agent, problem, req)
            except (KeyError, ProblemFileError, ValueError, OSError, RuntimeError) as e:
                reply = {"error": _one_line(e)}
            out.write(frame(reply))
            out.flush()
    finally:
        agent.close()
    return 0


def main() -> int:
    import accelopt  # noqa: F401  (the offline environment defaults)

    # the protocol gets a private copy of stdout; anything a library prints goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return serve(sys.argv[1], sys.stdin.buffer, out)


if __name__ == "__main__":
    sys.exit(main())
