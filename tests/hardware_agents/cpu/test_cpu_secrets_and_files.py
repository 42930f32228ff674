"""The sandbox hides secrets and the file system outside the kernel's private temp dir."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from cpu_helpers import c_solution
from cpu_helpers import c_solution_source_scale_shift as src

from accelopt.problem import Problem
from hardware_agents.cpu import CpuAgent

GOOD = "out[i] = 2.0f * x[i] + 1.0f;"


def test_api_key_in_parent_environment_is_invisible(
    cpu_agent: CpuAgent, scale_shift: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("ACCELOPT_TEST_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    # The kernel looks in its environment and in its parent's; finding the key aborts (and
    # prints it, so a leak would also show in the log).
    thief = src(
        GOOD,
        setup=r"""
        const char* names[] = {"ACCELOPT_TEST_API_KEY", "AWS_SECRET_ACCESS_KEY"};
        for (int k = 0; k < 2; k++) {
            const char* v = getenv(names[k]); if (v) { fprintf(stderr, "LEAK %s\n", v); abort(); } }
        char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
        FILE* f = fopen(path, "rb");
        if (f) { char buf[65536]; size_t n = fread(buf, 1, sizeof buf, f); fclose(f);
                 for (size_t i = 0; i + 8 < n; i++)
                     if (!memcmp(buf + i, "sk-test-", 8)) { fprintf(stderr, "LEAK %.40s\n", buf + i); abort(); } }
        fprintf(stderr, "no secrets found\n");
    """,
    )
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, thief))
    # finding a key aborts, so `passed` means none was found (a passed kernel's stderr is not kept)
    assert prof.status == "passed", prof.log
    assert secret not in prof.log


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm", "home"])
def test_write_outside_temp_dir_is_blocked(where: str, cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    target = Path(Path.home() if where == "home" else where) / f"accelopt-escape-{uuid.uuid4().hex}"
    writer = src(
        GOOD,
        setup=f"""
        FILE* f = fopen("{target}", "w");
        if (!f) abort();
        fputs("escaped", f); fclose(f);
    """,
    )
    try:
        prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, writer))
        assert not target.exists()
        assert prof.status == "runtime_error", prof.log
    finally:
        if target.exists():
            target.unlink()


def test_reading_private_files_is_blocked(cpu_agent: CpuAgent, scale_shift: Problem, tmp_path: Path) -> None:
    """World-readable files outside the allowed trees (here: a file under the test's tmp dir)
    and root's home cannot be opened."""
    secret = tmp_path / "credentials"
    secret.write_text("token")
    os.chmod(secret, 0o644)
    reader = src(
        GOOD,
        setup=f"""
        if (fopen("{secret}", "r")) abort();
        if (fopen("{Path.home()}/.bashrc", "r") || fopen("{Path.home()}/.profile", "r")) abort();
    """,
    )
    prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, reader))
    assert prof.status == "passed", prof.log


def test_network_is_unreachable(cpu_agent: CpuAgent, scale_shift: Problem) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        caller = src(
            GOOD,
            prelude="#include <arpa/inet.h>\n#include <sys/socket.h>",
            setup=f"""
            int s = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {{0}}; a.sin_family = AF_INET; a.sin_port = htons({port});
            a.sin_addr.s_addr = htonl(0x7f000001);
            if (s >= 0 && connect(s, (struct sockaddr*)&a, sizeof a) == 0) abort();
        """,
        )
        prof = cpu_agent.profile(scale_shift, c_solution(scale_shift, caller))
        assert prof.status == "passed", prof.log
    finally:
        server.close()
