"""The generic sandbox, driven with its self-check target (`hardware_agents/sandbox/probe.py`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from accelopt._env import OFFLINE_DEFAULTS
from hardware_agents import sandbox
from hardware_agents.sandbox import Sandbox, SandboxPolicy, landlock, run_sandboxed
from hardware_agents.sandbox.box import SINGLE_THREADED_POOLS
from hardware_agents.sandbox.probe import ProbeReport, ProbeRequest
from hardware_agents.sandbox.scrub import is_secret_name, scrub_env, scrub_output

SECRET_NAMES = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "MY_SERVICE_TOKEN",
    "HF_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "CLIENT_SECRET_VALUE",
    "GITHUB_TOKEN",
    "AZURE_OPENAI_KEY",
]


def test_secret_names_are_recognised() -> None:
    for name in SECRET_NAMES:
        assert is_secret_name(name), name
    for name in ["PATH", "LANG", "OMP_NUM_THREADS", "HOME", "TERM", "LITELLM_LOCAL_MODEL_COST_MAP"]:
        assert not is_secret_name(name), name


def test_scrubbed_environment_keeps_basics_and_refuses_secrets() -> None:
    env = scrub_env(
        {"PATH": "/usr/bin", "LANG": "C.UTF-8", "OPENAI_API_KEY": "x", "RANDOM_VAR": "y"},
        extra={"OMP_NUM_THREADS": "2"},
    )
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "2"}
    with pytest.raises(ValueError, match="secret"):
        scrub_env({}, extra={"ANTHROPIC_API_KEY": "x"})


def test_child_sees_no_secrets_and_runs_unprivileged(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECRET_NAMES:
        monkeypatch.setenv(name, "leaked-value")
    out = run_sandboxed("hardware_agents.sandbox.probe:describe", ProbeRequest())
    assert out.status == "ok", out.error
    rep = out.decode(ProbeReport)
    assert "leaked-value" not in str(rep.env)
    allowed = {
        "PATH",
        "LANG",
        "TERM",
        "TZ",
        "HOME",
        "TMPDIR",
        "PYTHONNOUSERSITE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPATH",
    }
    # importing accelopt in the child sets those
    allowed |= set(OFFLINE_DEFAULTS) | set(SINGLE_THREADED_POOLS)
    assert set(rep.env) <= allowed | {k for k in rep.env if k.startswith("LC_")}
    assert rep.env["HOME"] == rep.cwd
    if os.geteuid() == 0:
        assert rep.uid != 0 and rep.gid != 0
        assert out.isolation.get("network") == "netns"


def test_rlimits_are_applied() -> None:
    pol = SandboxPolicy(
        wall_timeout_s=7, address_space_bytes=3 << 30, max_processes=17, max_file_bytes=5 << 20
    )
    out = run_sandboxed("hardware_agents.sandbox.probe:describe", ProbeRequest(), policy=pol)
    rep = out.decode(ProbeReport)
    assert rep.rlimits["RLIMIT_AS"] == (3 << 30, 3 << 30)
    assert rep.rlimits["RLIMIT_FSIZE"] == (5 << 20, 5 << 20)
    assert rep.rlimits["RLIMIT_CORE"] == (0, 0)
    assert rep.rlimits["RLIMIT_NICE"] == (0, 0)  # it can never raise its own priority
    assert rep.rlimits["RLIMIT_CPU"][0] >= 7
    if os.geteuid() == 0:
        assert rep.rlimits["RLIMIT_NPROC"] == (17, 17)


def test_work_dir_is_private_and_removed() -> None:
    with Sandbox() as box:
        wd = box.workdir
        assert wd.is_dir()
        assert (wd.stat().st_mode & 0o777) == 0o700
        out = box.run("hardware_agents.sandbox.probe:describe", ProbeRequest(try_write=["f.txt"]))
        assert out.status == "ok"
        assert (wd / "f.txt").exists()
    assert not wd.exists()


def test_harness_exception_comes_back_as_error() -> None:
    out = run_sandboxed("hardware_agents.sandbox.probe:fail", b"boom")
    assert out.status == "error"
    assert out.error_type == "RuntimeError"
    assert "probe failure: boom" in out.error


def test_timeout_kills_the_whole_group() -> None:
    with Sandbox(SandboxPolicy(wall_timeout_s=1.0)) as box:
        out = box.run("hardware_agents.sandbox.probe:sleep", b"30")
        uid = box.uid
    assert out.status == "timeout" and out.error == "wall-clock timeout after 1.0 s"
    assert out.signal == "SIGKILL"  # killed, not left to finish its 30 s sleep
    assert 1.0 <= out.wall_s < 20  # a generous bound on the kill (about 1 s when idle)
    if uid is not None:
        assert sandbox.pids_of_uid(uid) == []


def test_a_crash_after_a_good_run_is_not_masked_by_the_old_report() -> None:
    with Sandbox() as box:
        assert box.run("hardware_agents.sandbox.probe:describe", ProbeRequest()).status == "ok"
        again = box.run("hardware_agents.sandbox.probe:sleep", b"30", timeout_s=0.5)
        assert again.status == "timeout"
        silent = box.run("hardware_agents.sandbox.probe:exit_silently")
        assert silent.status == "crashed" and "without a result" in silent.error
        missing = box.run("hardware_agents.sandbox.probe:no_such_function")
        assert missing.status == "error" and "no_such_function" in missing.error


def test_kernel_output_for_an_llm_is_bounded_and_scrubbed() -> None:
    key = "sk-" + "A1b2C3d4" * 5
    raw = (f"line with {key}\n\x1b[31mred\x00\n" + "".join(f"line {i}\n" for i in range(100))).encode()
    text = scrub_output(raw, max_lines=10)
    assert key not in text and "[redacted]" in text
    assert "\x1b" not in text and "\x00" not in text
    assert text.count("\n") == 10 and text.endswith("[... output truncated ...]")
    assert len(scrub_output(b"x" * 10_000, max_chars=500)) < 600


def test_the_work_dir_is_a_capped_tmpfs_of_its_own() -> None:
    """As root every sandbox's work dir is its own tmpfs: a kernel cannot hold more than the cap
    of the machine's RAM in files (before, the work dirs shared /dev/shm: a kernel held 1.5 GiB)."""
    import msgspec

    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    here = str(Path(__file__).resolve().parent)
    with Sandbox(SandboxPolicy(wall_timeout_s=30, workdir_bytes=8 << 20, python_path=(here,))) as box:
        assert os.path.ismount(box.workdir) and box.workdir_limit == "tmpfs 8 MiB"
        out = box.run("sandbox_targets:fill_workdir", b"64")
        assert out.status == "ok" and out.isolation["workdir"] == "tmpfs 8 MiB", out.error
        assert 6 << 20 <= msgspec.msgpack.decode(out.payload) <= 8 << 20
        work = box.workdir
    assert not work.exists() and not os.path.ismount(work)
    with Sandbox(
        SandboxPolicy(wall_timeout_s=30, workdir_bytes=0, python_path=(here,))
    ) as box:  # the cap down
        assert not os.path.ismount(box.workdir)
        assert msgspec.msgpack.decode(box.run("sandbox_targets:fill_workdir", b"12").payload) == 12 << 20


def test_threads_started_before_the_lockdown_are_confined_or_named() -> None:
    """A library may start threads before the lockdown (a CUDA driver's, in the Triton
    warm-up). seccomp reaches them (TSYNC: socket() fails there too), so does the CPU
    affinity, and so does Landlock (TSYNC from ABI 8, each thread confining itself before it:
    test_thread_confinement.py shows what that thread may no longer read)."""
    import msgspec

    here = str(Path(__file__).resolve().parent)
    cpus = (sorted(os.sched_getaffinity(0))[0],)
    policy = SandboxPolicy(wall_timeout_s=30, python_path=(here,), preload=("early_thread",), cpus=cpus)
    with Sandbox(policy) as box:
        out = box.run("sandbox_targets:probe_early_thread")
    assert out.status == "ok", f"{out.error}\n{out.log}"
    probe = msgspec.msgpack.decode(out.payload)
    assert probe["socket_errno"] == errno.EPERM
    assert probe["cpus"] == list(cpus)
    assert out.isolation["seccomp_threads"] == "all (TSYNC)"
    if landlock.abi_version() >= 8:
        assert out.isolation["landlock_threads"] == "all (TSYNC)"
    else:
        assert out.isolation["landlock_threads"] == "all (1 other thread(s) confined themselves, one by one)"


def test_the_launcher_starts_no_thread_before_the_lockdown() -> None:
    """What every child imports before its lockdown (the launcher, its package) starts no
    thread: a Landlock without TSYNC (ABI < 8) would leave it unconfined. numpy starts BLAS
    threads at import, so the sandbox package imports it only where a shared region is made."""
    out = run_sandboxed("hardware_agents.sandbox.probe:nothing")
    assert out.status == "ok", f"{out.error}\n{out.log}"
    assert out.isolation["landlock_threads"] in ("all (one thread)", "all (TSYNC)")
    assert out.isolation["threads"].startswith("1 (")


def test_files_the_child_left_are_read_only_inside_its_work_dir(tmp_path: Path) -> None:
    """What the parent reads of the child's files (`Sandbox.read_file`, `open_file`) resolves
    inside the work dir and is a regular file: a name outside it, a folder the child replaced
    by a link out of it, or a FIFO (whose open would block the parent forever) is refused."""
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "f.pt").write_bytes(b"root only")
    with Sandbox() as box:
        (box.workdir / "out").mkdir()
        (box.workdir / "out" / "ok.pt").write_bytes(b"fine")
        assert box.read_file("out/ok.pt", 100) == b"fine"
        os.symlink(outside, box.workdir / "linked")
        os.mkfifo(box.workdir / "out" / "fifo.pt")
        for rel in ("linked/f.pt", "../secret/f.pt", str(outside / "f.pt"), "out/fifo.pt"):
            with pytest.raises(OSError):
                box.read_file(rel, 100)
            with pytest.raises(OSError):
                box.open_file(rel, 100)
