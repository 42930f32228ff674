"""The sandbox launcher: `python -m hardware_agents.sandbox.child SPEC_FILE`.

Runs in the fresh child process that `Sandbox` (`box.py`) starts, and locks it down
in an order that works, before any untrusted code is loaded. Confinement is a property of
the process, not of a thread: whatever runs on any thread of it later (a BLAS worker, a CUDA
driver's helper) must be as confined as the main thread, or the child refuses to run.

1. while the process has exactly one thread (the launcher imports nothing that starts one;
   checked, else it refuses): a new network namespace (needs root, so before dropping
   privileges; best effort) and, where the sandbox uid cannot reach the trees it may read, a
   mount namespace that exposes them (`reach.py`). Namespaces belong to a thread; made now,
   every thread started later inherits them;
2. import the trusted harness module and `preload` modules (after step 5 the interpreter
   may no longer be able to read its own library, e.g. a Python under /root). What they
   create in the work dir (Triton's cache, CUDA's ~/.nv, torch's caches: HOME and TMPDIR
   are the work dir) is created by root, so everything under the work dir is handed to
   the sandbox uid before the drop: the libraries write there again later, as that uid.
   They may start threads (the sandbox's environment sets the BLAS and OpenMP pools to one
   thread, so numpy starts none; a CUDA driver does);
3. rlimits: CPU seconds, address space, processes, file size, core dumps = 0;
4. cwd = the private work dir, umask 077;
5. drop to the unprivileged uid/gid chosen by the parent (when started as root; glibc
   changes the ids of every thread);
6. no_new_privs + Landlock on every thread (`landlock.py`, `threads.py`): writes only
   beneath the work dir, reads only beneath the allowed trees (of /proc only this process's
   own entry and a few system files), no TCP, no signals/abstract sockets outside the
   domain;
7. the CPU affinity the parent gives (`cpus`, every thread), then seccomp on every thread
   (TSYNC): no sockets of any family, optionally no new processes (threads only), for a child
   the parent stops nothing that could continue it or widen its CPU mask (`stoppable`), no
   clearing of the parent-death signal, no ptrace/namespaces/mounts (see `seccomp.py`);
8. report the isolation actually applied on the status pipe and close it, with the list
   of the process's threads (`threads`): this is the only report the parent believes,
   because it is sent before any untrusted code exists in the process. If the isolation
   the parent requires is missing, stop here: no untrusted code is ever loaded without it;
9. call `target(payload, workdir)`; encode its msgspec result into the result file.

The result file is data the parent validates, never a verdict it trusts.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import signal
import sys
import traceback
from pathlib import Path

import msgspec

from hardware_agents.sandbox import landlock, reach, seccomp, threads
from hardware_agents.sandbox.records import ChildReport, ChildSpec

_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1
CONFINED = "each confined"  # the threads record's word for every thread under every wall


# /proc entries a child may read besides its own /proc/<pid> (libraries read these at start)
PROC_READS = (
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/filesystems",
    "/proc/sys/kernel",
    "/proc/sys/vm",
    "/proc/loadavg",
)


def missing_isolation(isolation: dict[str, str], require: list[str]) -> list[str]:
    """Which required kinds of isolation `isolation` (as recorded) lacks."""
    missing = []
    if "filesystem" in require and not (
        isolation.get("landlock_abi") and isolation.get("landlock_reads") == "restricted"
    ):
        missing.append(f"filesystem (Landlock: {isolation.get('landlock', 'not applied')})")
    sockets_blocked = "sockets" in isolation.get("seccomp", "").split(",")
    if "network" in require and not (isolation.get("network") == "netns" or sockets_blocked):
        missing.append(
            f"network (namespace: {isolation.get('network', 'none')}; "
            f"seccomp: {isolation.get('seccomp', 'not applied')})"
        )
    if "no_fork" in require and "no_fork" not in isolation.get("seccomp", "").split(","):
        missing.append(f"no new processes (seccomp: {isolation.get('seccomp', 'not applied')})")
    if "stoppable" in require and "stoppable" not in isolation.get("seccomp", "").split(","):
        missing.append(f"no self-continue while stopped (seccomp: {isolation.get('seccomp', 'not applied')})")
    if ("filesystem" in require or "network" in require) and CONFINED not in isolation.get("threads", ""):
        walls = f"Landlock: {isolation.get('landlock_threads', 'not applied')}; seccomp: " + isolation.get(
            "seccomp_threads", "not applied"
        )
        missing.append(f"every thread confined (threads: {isolation.get('threads', 'unknown')}; {walls})")
    if "cpus" in require and "cpus" not in isolation:
        missing.append("the CPU affinity it was given")
    return missing


def _write_report(path: str, report: ChildReport) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(msgspec.msgpack.encode(report))
    os.replace(tmp, path)


def _resolve(target: str):  # -> Callable[[bytes, Path], object]
    mod_name, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"target {target!r} must be 'package.module:function'")
    return getattr(importlib.import_module(mod_name), attr)


def give_tree(root: Path, uid: int, gid: int) -> None:
    """Hand everything beneath `root` to uid/gid (links themselves, never their targets):
    files and dirs the preloaded libraries created as root, before the privilege drop."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.lchown(path, uid, gid)


def _reach(spec: ChildSpec, isolation: dict[str, str]) -> None:
    """Before the drop to the sandbox uid: make the trees it may read reachable by it, wherever
    the checkout lives (`reach.py`); fail with what to change where that cannot be
    done."""
    assert spec.uid is not None and spec.gid is not None
    try:
        line = reach.expose(spec.reach_paths, spec.uid, spec.gid, writable=tuple(spec.write_paths))
    except reach.ReachError as e:
        tops = sorted({t for p in spec.reach_paths if (t := reach.blocked_ancestor(p, spec.uid, spec.gid))})
        raise reach.ReachError(
            f"the sandbox uid cannot reach {', '.join(tops)} ({e}): make it searchable "
            f"(chmod o+x {' '.join(tops)}) or keep the checkout and its .venv elsewhere"
        ) from e
    if line:
        isolation["reach"] = line
    closed = reach.unreachable(spec.reach_paths, spec.uid, spec.gid)
    if closed:
        raise reach.ReachError(
            "the sandbox uid cannot read these allowed paths (their own mode keeps others out): "
            + ", ".join(closed)
            + "; make them readable by others (chmod -R o+rX) or keep the checkout elsewhere"
        )


def _lock_down(spec: ChildSpec, isolation: dict[str, str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for name, (soft, hard) in spec.rlimits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    os.chdir(spec.workdir)
    os.umask(0o077)
    if spec.uid is not None and spec.gid is not None:
        give_tree(Path(spec.workdir), spec.uid, spec.gid)
        os.setgroups([])
        os.setresgid(spec.gid, spec.gid, spec.gid)
        os.setresuid(spec.uid, spec.uid, spec.uid)
        isolation["uid"] = str(os.getuid())
    # die with the parent (a changed uid clears this, so it is set after the drop): a kernel
    # server stopped between batches would otherwise stay forever once its parent is gone
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before that
        os._exit(4)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    if spec.landlock:
        reads = None
        if spec.read_paths is not None:
            reads = [*spec.read_paths, f"/proc/{os.getpid()}", *PROC_READS]
        try:
            isolation.update(landlock.restrict(write_paths=spec.write_paths, read_paths=reads))
        except landlock.LandlockError as e:
            isolation["landlock"] = f"unavailable: {e}"
    if spec.cpus:  # before seccomp, which refuses sched_setaffinity to a stoppable child
        try:
            for tid in threads.thread_ids() or [0]:  # threads libraries started before the lockdown too
                os.sched_setaffinity(tid, spec.cpus)
            isolation["cpus"] = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        except OSError as e:
            isolation["cpus_error"] = str(e)
    if spec.seccomp_sockets or spec.seccomp_no_fork or spec.seccomp_stoppable or spec.seccomp_pdeathsig:
        try:
            isolation.update(
                seccomp.restrict(
                    sockets=spec.seccomp_sockets,
                    no_fork=spec.seccomp_no_fork,
                    stoppable=spec.seccomp_stoppable,
                    pdeathsig=spec.seccomp_pdeathsig,
                )
            )
        except seccomp.SeccompError as e:
            isolation["seccomp"] = f"unavailable: {e}"


class IsolationUnavailable(Exception):
    """The isolation the parent requires could not be applied: no untrusted code may run."""


def _report_isolation(spec: ChildSpec, isolation: dict[str, str]) -> None:
    """Send the isolation record once, and close the pipe (nothing later is believed)."""
    if spec.status_fd is None:
        return
    data = msgspec.msgpack.encode(isolation)
    os.write(spec.status_fd, len(data).to_bytes(4, "little") + data)
    os.close(spec.status_fd)
    spec.status_fd = None


def _namespaces(spec: ChildSpec, isolation: dict[str, str]) -> None:
    """Step 1: the namespaces, while this is the process's only thread (a namespace joined
    by one thread leaves the others outside it; threads started later inherit it)."""
    tids = threads.thread_ids()
    if len(tids) != 1:
        raise IsolationUnavailable(
            f"the launcher has {len(tids) or 'an unknown number of'} threads before its namespaces "
            "are made (it must have one): something it imports started a thread"
        )
    if spec.isolate_network:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) == 0:
            isolation["network"] = "netns"
        else:
            isolation["network"] = f"shared ({os.strerror(ctypes.get_errno())})"
    if spec.uid is not None and spec.gid is not None:
        _reach(spec, isolation)


def _record_threads(isolation: dict[str, str]) -> None:
    """Step 8's list of the process's threads, and whether each is confined."""
    tids = threads.thread_ids()
    walls = {"Landlock": isolation.get("landlock_threads"), "seccomp": isolation.get("seccomp_threads")}
    applied = [name for name, threads_ in walls.items() if threads_ is not None]
    every = bool(tids) and all((walls[name] or "").startswith("all") for name in applied)
    isolation["threads"] = f"{len(tids)} ({', '.join(map(str, tids))}): " + (
        f"{CONFINED} ({' and '.join(applied) or 'namespaces only'})" if every else "not every one confined"
    )


def main(argv: list[str]) -> int:
    spec = msgspec.msgpack.decode(Path(argv[1]).read_bytes(), type=ChildSpec)
    isolation: dict[str, str] = {}
    try:
        _namespaces(spec, isolation)
        fn = _resolve(spec.target)
        for mod in spec.preload:
            importlib.import_module(mod)
        _lock_down(spec, isolation)
        _record_threads(isolation)
        _report_isolation(spec, isolation)
        missing = missing_isolation(isolation, spec.require)
        if missing:
            raise IsolationUnavailable("required isolation is missing: " + "; ".join(missing))
    except IsolationUnavailable as e:
        _report_isolation(spec, isolation)  # what was applied, before the refusal
        _write_report(
            spec.result_path,
            ChildReport(ok=False, error=str(e), error_type="IsolationUnavailable", isolation=isolation),
        )
        os._exit(3)
    except BaseException as e:  # setup failed: nothing untrusted ran yet
        _write_report(
            spec.result_path,
            ChildReport(
                ok=False,
                error=f"sandbox setup failed: {e}",
                error_type="SandboxSetupError",
                isolation=isolation,
            ),
        )
        sys.stdout.flush()
        os._exit(3)
    try:
        result = fn(spec.payload, Path(spec.workdir))
        payload = result if isinstance(result, bytes) else msgspec.msgpack.encode(result)
        report = ChildReport(ok=True, payload=payload, isolation=isolation)
    except BaseException as e:
        report = ChildReport(
            ok=False,
            error=f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=20)}",
            error_type=type(e).__name__,
            isolation=isolation,
        )
    _write_report(spec.result_path, report)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown and any atexit hooks the untrusted code registered


if __name__ == "__main__":
    main(sys.argv)
