"""Isolation fails closed: a kernel never runs without filesystem and network isolation
unless the run allows it, and every profile records the isolation it ran under.

The kernel here tries what the walls forbid (read a file the test made outside the trees
it may read, make a socket, fork) and prints each errno; what it printed is read from the
output the agent captured of its process, so each test observes what the kernel could do,
not only the record the sandbox sent."""

from __future__ import annotations

import errno
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpu_helpers import c_solution, kernel_output

from accelopt.problem import Problem, Solution
from hardware_agents.cpu import CpuAgent
from hardware_agents.sandbox import allow_unisolated, isolation_problem, unisolated_allowed

_PROBE = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
static int probed;
static int read_errno(void) {  /* 0: it read the test's file, its very content */
    int fd = open("@PATH@", O_RDONLY);
    if (fd < 0) return errno;
    char buf[128] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && strcmp(buf, "@CONTENT@") == 0 ? 0 : -1;
}
void kernel(const float* x, float* out) {
    if (!probed) {
        probed = 1;
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        int sock = s >= 0 ? 0 : errno;
        if (s >= 0) close(s);
        pid_t p = fork();
        int forked = p >= 0 ? 0 : errno;
        if (p == 0) _exit(0);
        if (p > 0) waitpid(p, NULL, 0);
        fprintf(stderr, "isolation probe: read=%d socket=%d fork=%d\n", read_errno(), sock, forked);
    }
    #pragma omp parallel for
    for (long i = 0; i < (long)M * N; i++) out[i] = 2.0f * x[i] + 1.0f;
}
"""


@pytest.fixture
def probe(scale_shift: Problem) -> Iterator[Solution]:
    """The probe kernel, aimed at a file outside every tree the sandbox may read that its uid
    could read otherwise (world-readable, in a world-searchable directory)."""
    folder = Path(tempfile.mkdtemp(prefix="accelopt-isolation-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        content = f"answers {uuid.uuid4().hex}"
        (folder / "answers.txt").write_text(content)
        (folder / "answers.txt").chmod(0o644)
        src = _PROBE.replace("@PATH@", str(folder / "answers.txt")).replace("@CONTENT@", content)
        yield c_solution(scale_shift, src, name="isolation_probe")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _probed(logs: list[str]) -> dict[str, int]:
    """What the probe printed (every kernel server the profile started), or {} if it never ran."""
    found = re.findall(r"isolation probe: read=(-?\d+) socket=(-?\d+) fork=(-?\d+)", "\n".join(logs))
    assert len(found) <= 1, logs
    return {k: int(v) for k, v in zip(("read", "socket", "fork"), found[0], strict=True)} if found else {}


def _agent_without_landlock(cpu_agent: CpuAgent) -> CpuAgent:
    # Landlock switched off stands in for a kernel that lacks it (this machine has it)
    return CpuAgent(
        cache_dir=cpu_agent.cache_dir,
        calibrate_if_missing=False,
        timeout_s=30.0,
        sandbox_options={"landlock": False},
    )


def test_missing_filesystem_isolation_refuses_the_kernel(
    cpu_agent: CpuAgent, scale_shift: Problem, probe: Solution
) -> None:
    agent = _agent_without_landlock(cpu_agent)
    try:
        with kernel_output(agent) as logs:
            prof = agent.profile(scale_shift, probe)
    finally:
        agent.close()
    assert prof.status == "sandbox_error", prof.log
    assert "filesystem" in prof.log and "sandbox.allow_unisolated" in prof.log
    assert "landlock_abi" not in prof.isolation and "seccomp" in prof.isolation
    assert len(logs) == 1 and _probed(logs) == {}, logs  # its child was refused before the kernel was loaded


def test_allowed_unisolated_runs_and_says_so(
    cpu_agent: CpuAgent, scale_shift: Problem, probe: Solution
) -> None:
    """The control of the test above and of the one below: allowed, the same agent runs the
    probe, which reads the test's file (no Landlock), while seccomp still refuses it a
    socket and a fork."""
    agent = _agent_without_landlock(cpu_agent)
    try:
        with allow_unisolated(True), kernel_output(agent) as logs:
            assert unisolated_allowed()
            prof = agent.profile(scale_shift, probe, measure=False)
    finally:
        agent.close()
    assert not unisolated_allowed()
    assert prof.status == "unmeasured", prof.log
    assert "landlock_abi" not in prof.isolation  # on record: it ran without Landlock
    assert _probed(logs) == {"read": 0, "socket": errno.EPERM, "fork": errno.EPERM}, logs


def test_profiles_record_their_isolation(cpu_agent: CpuAgent, scale_shift: Problem, probe: Solution) -> None:
    with kernel_output(cpu_agent) as logs:
        prof = cpu_agent.profile(scale_shift, probe, measure=False)
    assert prof.status == "unmeasured", prof.log
    iso = prof.isolation
    assert iso["landlock_reads"] == "restricted" and iso["landlock_tcp"] == "blocked"
    assert set(iso["seccomp"].split(",")) >= {"sockets", "no_fork"}
    assert "_untrusted" not in iso
    # and what the record says held: Landlock refused the read, seccomp the socket and the fork
    assert _probed(logs) == {"read": errno.EACCES, "socket": errno.EPERM, "fork": errno.EPERM}, logs


def test_this_machine_can_isolate(tmp_path: Path) -> None:
    assert isolation_problem() is None
