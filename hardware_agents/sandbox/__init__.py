"""The sandbox: run a trusted harness function in a locked-down child process, with untrusted
code inside. This module is its interface; nothing outside the package imports the others.

Usage::

    with Sandbox(SandboxPolicy(wall_timeout_s=30)) as box:
        (box.workdir / "src.c").write_text(...); box.give("src.c")       # stage inputs
        out = box.run("hardware_agents.cpu.compiler:compile_in_child", request)  # run to the end
        if out.status == "ok":
            result = out.decode(CompileOutput)
            data = box.read_file("kernel.so", max_bytes=...)  # files the child wrote
        child = box.spawn("hardware_agents.cpu.server:serve", request, pass_fds=(...))  # driven

The child is `python -m hardware_agents.sandbox.child`; it imports the target module,
locks itself down (see that module), then calls `target(payload: bytes, workdir: Path)`,
whose return value (a msgspec Struct or bytes) comes back msgpack-encoded. The harness
loads the untrusted code itself (a .so through ctypes, a Triton module, ...).

Isolation, and why it is done this way here (Linux, root, kernel 6.x, no cgroup v2):

- Environment: built from an allowlist (PATH, LANG, LC_*, TZ, ...) plus the policy's
  variables, and anything that looks like a secret (*_API_KEY, *_TOKEN, *SECRET*, AWS_*,
  OPENAI*, ANTHROPIC*, HF_TOKEN, ...) is refused even when passed explicitly. HOME and
  TMPDIR point at the work dir.
- Identity: when the parent is root the child runs as a fresh unprivileged uid/gid picked
  from a private range (no passwd entry needed), one per run. That is what makes
  RLIMIT_NPROC effective (root ignores it), hides the parent's /proc/<pid>/environ and
  memory, and lets us kill every process the run created, even ones that left the process
  group with setsid(), by sweeping /proc for that uid.
- Filesystem: Landlock (ABI >= 1, via ctypes) confines writes to the work dir (plus
  /dev/null & co.) and, by default, reads to system trees (/usr, /lib, /etc, /sys, /opt),
  the Python installation's libraries, our own trusted packages, this process's own
  /proc/<pid> and a few /proc system files, and paths the policy adds: never the repo root,
  `runs/`, the memory, a home directory, /tmp, or another process's /proc entry. TCP
  connect/bind is blocked (ABI >= 4), and so are signals and abstract unix sockets outside
  the sandbox (ABI >= 6). Landlock needs no privilege and cannot be undone by the child.
- System calls: a seccomp filter (`seccomp.py`) refuses socket() of every
  family (UDP and pathname unix sockets included), ptrace and namespace/mount calls,
  clearing the parent-death signal, for kernel servers new processes (threads only), and,
  for every child the parent stops and continues (`spawn`), whatever could continue it
  while stopped or widen its CPU mask (profile `stoppable`).
- The freeze: a spawned child is stopped between the parent's commands, and the parent
  checks that it stayed stopped (`freeze.py`: the CPU time of every process of
  the sandbox read at the stop and again before the continue, the state, no foreign
  continue); `SandboxChild.resume` raises `RanWhileStopped` otherwise.
- The clock's priority: a child the parent times (`SandboxChild.time_at_realtime`) runs each
  interval between a continue and its stop at real-time priority, the parent's waiting thread
  above it, so the host's other work stays out of the clock (`realtime.py`; where the host
  refuses it, the isolation record says `timing: ordinary priority (why)`).
- Every thread: confinement is a property of the process. The namespaces are made while the
  child has one thread (so every later thread inherits them); Landlock and seccomp reach
  every thread (TSYNC, or, for Landlock before ABI 8, each thread confining itself:
  `threads.py`), else the child refuses. The record lists the threads (`threads`).
- Private roots: what an agent process stages for its children lives in a 0700 root of its
  own (`resources.process_root`), which no sandbox uid can traverse; a child reaches the
  paths it is given through its own mount namespace (`reach.py`).
- Fails closed: the child reports the isolation it applied on a pipe before any untrusted
  code exists in it (that report is the only one believed), and refuses to go on when the
  required isolation (filesystem and network, see `required_isolation`) is missing; the
  outcome's status is then `unisolated`. `allow_unisolated(True)` (the run config's
  `sandbox.allow_unisolated`) lifts the requirement, and the outcome's `isolation` still
  records what was (not) applied.
- Network: a new network namespace (unshare(CLONE_NEWNET), as root, before the uid drop);
  best effort, recorded in `isolation`.
- Limits: RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC (per sandbox uid), RLIMIT_FSIZE,
  RLIMIT_CORE=0, RLIMIT_NICE=0 (it can never raise its priority); a wall-clock timeout
  after which the whole process group, and every process of the sandbox uid, is SIGKILLed;
  the CPU affinity the policy gives (`cpus`).
- The work dir is a fresh 0700 directory owned by the sandbox uid, removed afterwards. As
  root it is a tmpfs of its own capped at `workdir_bytes` (and 16384 files): a kernel
  cannot fill the machine's RAM through /dev/shm. Files the child leaves are read with
  O_NOFOLLOW and a size cap.
- Orphans: a sandbox uid belongs to the process that holds its lock
  (`uids.py`); the first sandbox of every process kills the
  processes of sandbox uids whose owner died (SIGKILL of the agent leaves them to init).

Not root: no uid drop (RLIMIT_NPROC then counts all of the user's processes, so it is set
relative to their current count), no network namespace, no tmpfs work dir (recorded as
`workdir: unbounded` in the isolation), and the freeze covers the child's session rather
than a uid; Landlock and seccomp still apply.

The package's modules: `box.py` (the `Sandbox`: its work dir, `run`, `spawn`), `driven.py`
(`SandboxChild`, a spawned child stopped between its commands), `cancel.py` (`CancelScope`:
one piece of work's children, SIGKILLed when whoever asked for the work gives up on it), `launch.py` (a started
child's isolation report and outcome), `child.py` (the launcher) and `records.py` (what it
and the parent exchange), `policy.py` (`SandboxPolicy`, `SandboxOutcome`, the isolation a run
requires), `scrub.py` (the child's environment, its output), `resources.py` (rlimits, the
work dir, the files left in it), `shm.py` (memory the parent shares with a child), and the
walls themselves: `landlock.py`, `seccomp.py`, `uids.py`, `reach.py`, `threads.py`, `freeze.py`,
`realtime.py`;
`probe.py` is a self-check target (`run_sandboxed("hardware_agents.sandbox.probe:describe")`).
"""

from hardware_agents.sandbox.box import Sandbox, isolation_problem, run_sandboxed
from hardware_agents.sandbox.cancel import CancelScope, WorkCancelled, detached, raise_if_cancelled
from hardware_agents.sandbox.driven import SandboxChild
from hardware_agents.sandbox.freeze import FreezeBreach, RanWhileStopped
from hardware_agents.sandbox.libc import memory_libc
from hardware_agents.sandbox.policy import (
    SandboxOutcome,
    SandboxPolicy,
    SandboxStatus,
    allow_unisolated,
    unisolated_allowed,
)
from hardware_agents.sandbox.records import in_sandbox_child
from hardware_agents.sandbox.resources import default_base_dir, private_dir, sweep_stale
from hardware_agents.sandbox.shm import SharedRegion, align_up
from hardware_agents.sandbox.uids import pids_of_uid, sweep_orphans

__all__ = [
    "CancelScope",
    "FreezeBreach",
    "RanWhileStopped",
    "Sandbox",
    "SandboxChild",
    "SandboxOutcome",
    "SandboxPolicy",
    "SandboxStatus",
    "SharedRegion",
    "WorkCancelled",
    "align_up",
    "allow_unisolated",
    "default_base_dir",
    "detached",
    "in_sandbox_child",
    "isolation_problem",
    "memory_libc",
    "pids_of_uid",
    "private_dir",
    "raise_if_cancelled",
    "run_sandboxed",
    "sweep_orphans",
    "sweep_stale",
    "unisolated_allowed",
]
