"""The sandbox: a private work dir and the means to run sandboxed children in it (see the
package's docstring for the isolation, `child.py` for the order it is applied in)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import BinaryIO

import msgspec

from hardware_agents.sandbox import cancel, uids
from hardware_agents.sandbox.driven import SandboxChild
from hardware_agents.sandbox.launch import Launched, collect, kill_all, wait_exit
from hardware_agents.sandbox.policy import (
    SandboxOutcome,
    SandboxPolicy,
    required_isolation,
    unisolated_allowed,
)
from hardware_agents.sandbox.records import CHILD_MODULE, ChildSpec
from hardware_agents.sandbox.resources import (
    default_base_dir,
    mount_tmpfs,
    open_child_file,
    private_dir,
    read_file_safely,
    remount_tmpfs,
    rlimits,
    unmount,
)
from hardware_agents.sandbox.scrub import scrub_env

_SYSTEM_TREES = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/sys")
PACKAGES_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds hardware_agents/
# our own packages a harness may import lazily (their source is public; nothing else of the
# checkout is readable: not runs/, the memory, tests/ or the repo's other files)
TRUSTED_PACKAGES = ("hardware_agents", "accelopt")


# thread pools that libraries start at import (numpy's BLAS, OpenMP) start none: a child imports
# them before its lockdown, and every thread it has then must be confined one by one (`threads.py`);
# a pool a harness widens after the lockdown starts its threads inside the sandbox
SINGLE_THREADED_POOLS = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def default_read_paths() -> list[str]:
    """System trees, the Python installation's libraries and our trusted packages."""
    paths = list(_SYSTEM_TREES)
    cfg = sysconfig.get_paths()
    paths += [cfg["stdlib"], cfg["platstdlib"], cfg["purelib"], cfg["platlib"]]
    # Python's headers: Triton (3.6 and older) builds a C launcher per kernel signature with gcc
    paths += [p for p in (cfg.get("include"), cfg.get("platinclude")) if p and os.path.isdir(p)]
    paths += [os.path.join(p, "lib") for p in {sys.base_prefix, sys.base_exec_prefix}]
    paths += [
        p
        for p in sys.path
        if p and p.endswith(("site-packages", "dist-packages", "lib-dynload")) and os.path.isdir(p)
    ]
    paths += [str(PACKAGES_ROOT / pkg) for pkg in TRUSTED_PACKAGES]
    return sorted({os.path.realpath(p) for p in paths})


class Sandbox:
    """A private work dir plus the means to run sandboxed children in it (one at a time)."""

    def __init__(
        self,
        policy: SandboxPolicy | None = None,
        *,
        base_dir: Path | None = None,
        prefix: str = "accelopt-sbx-",
    ) -> None:
        self.policy = policy or SandboxPolicy()
        self._root = os.geteuid() == 0
        self.uid: int | None = None
        self.gid: int | None = None
        uids.sweep_once()  # orphans of agents that died: once per process
        self._lease = uids.allocate() if self._root and self.policy.drop_privileges else None
        uid = self._lease.uid if self._lease is not None else None
        self.uid = self.gid = uid
        self._closed = False
        self._outer = private_dir(base_dir or default_base_dir(), prefix)  # 0700, ours: the log lives here
        self.workdir = self._outer / "work"
        self.workdir.mkdir(mode=0o700)
        self.workdir_limit = self._limit_workdir()
        (self.workdir / ".sandbox").mkdir(mode=0o700)
        if uid is not None:
            os.chmod(self._outer, 0o711)  # the child may traverse to its work dir, not list ours
            os.chown(self.workdir, uid, uid)
            os.chown(self.workdir / ".sandbox", uid, uid)

    def _limit_workdir(self) -> str:
        """Give the work dir a tmpfs of its own, capped at `workdir_bytes` (as root); what was
        done, for the isolation record."""
        size = self.policy.workdir_bytes
        if size <= 0:
            return "unbounded (no limit asked)"
        if not self._root:
            return "unbounded (not root: no tmpfs of its own)"
        why = mount_tmpfs(self.workdir, size, self.uid)
        if why is not None:
            return f"unbounded (tmpfs mount failed: {why})"
        return f"tmpfs {size >> 20} MiB"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._lease is not None:
            self._lease.release()  # kills whatever still runs as the uid
        unmount(self.workdir)
        shutil.rmtree(self._outer, ignore_errors=True)

    def resize_workdir(self, size: int) -> str:
        """Re-cap the work dir's tmpfs at `size` bytes (a child started ahead of need gets the
        cap of the work it is given; never below what it holds); what was done, for the record."""
        if not self.workdir_limit.startswith("tmpfs"):
            return self.workdir_limit
        used = sum(f.stat().st_size for f in self.workdir.rglob("*") if f.is_file() and not f.is_symlink())
        size = max(size, used + (64 << 20))
        if not remount_tmpfs(self.workdir, size):
            return self.workdir_limit  # the cap it was started with stays
        self.workdir_limit = f"tmpfs {size >> 20} MiB"
        return self.workdir_limit

    def give(self, relpath: str) -> Path:
        """Make a staged file or dir (created by the parent) readable by the child."""
        p = self.workdir / relpath
        if self.uid is not None and self.gid is not None:
            for q in [p, *p.parents]:
                if q == self.workdir:
                    break
                os.chown(q, self.uid, self.gid, follow_symlinks=False)
        return p

    def read_file(self, relpath: str, max_bytes: int) -> bytes:
        return read_file_safely(self.child_path(relpath), max_bytes)

    def open_file(self, relpath: str, max_bytes: int) -> BinaryIO:
        """A binary file object for a file the child wrote (see `open_child_file`)."""
        return os.fdopen(open_child_file(self.child_path(relpath), max_bytes), "rb")

    def child_path(self, relpath: str) -> Path:
        """`relpath` in the work dir, refused (OSError) where it resolves outside it: a name the
        child gave (`../x`, `/x`) or a folder it replaced by a link would have the parent read,
        as root, a file of its choosing. Read while the child is stopped or gone, the links
        cannot change between this check and the open (whose O_NOFOLLOW covers the last name)."""
        root = Path(os.path.realpath(self.workdir))
        path = self.workdir / relpath
        parent = Path(os.path.realpath(path.parent))
        if parent != root and root not in parent.parents:
            raise OSError(errno.EACCES, f"{relpath}: outside the sandbox's work dir")
        return path

    def run(
        self,
        target: str,
        payload: bytes | msgspec.Struct = b"",
        *,
        timeout_s: float | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> SandboxOutcome:
        """Run `target(payload, workdir)` ("pkg.module:function") in a sandboxed child."""
        timeout = timeout_s if timeout_s is not None else self.policy.wall_timeout_s
        child = self._launch(target, payload, timeout, extra_env, (), stoppable=False)
        timed_out = not wait_exit(child.proc, timeout)
        if timed_out:
            kill_all(child.proc, self.uid)
            child.proc.wait()
        return self._collect(child, timed_out, timeout)

    def spawn(
        self,
        target: str,
        payload: bytes | msgspec.Struct = b"",
        *,
        timeout_s: float | None = None,
        pass_fds: tuple[int, ...] = (),
        extra_env: dict[str, str] | None = None,
    ) -> SandboxChild:
        """Start `target(payload, workdir)` and return at once: for a child the parent drives
        (a kernel server), stopped between its commands (see `SandboxChild`), under the seccomp
        profile `stoppable` unless the policy turns it off. `pass_fds` are inherited under the
        same numbers."""
        timeout = timeout_s if timeout_s is not None else self.policy.wall_timeout_s
        launched = self._launch(
            target, payload, timeout, extra_env, pass_fds, stoppable=self.policy.stoppable
        )
        return SandboxChild(self, launched, timeout)

    def _launch(
        self,
        target: str,
        payload: bytes | msgspec.Struct,
        timeout: float,
        extra_env: dict[str, str] | None,
        pass_fds: tuple[int, ...],
        *,
        stoppable: bool,
    ) -> Launched:
        pol = self.policy
        raw = payload if isinstance(payload, bytes) else msgspec.msgpack.encode(payload)
        result_path = self.workdir / ".sandbox" / "result.msgpack"
        status_r, status_w = os.pipe()
        extra = (
            *(("no_fork",) if pol.no_fork else ()),
            *(("stoppable",) if stoppable else ()),
            *(("cpus",) if pol.cpus else ()),
        )
        allowed = [*default_read_paths(), str(self.workdir), *pol.read_paths, *pol.python_path]
        spec = ChildSpec(
            target=target,
            payload=raw,
            workdir=str(self.workdir),
            result_path=str(result_path),
            uid=self.uid,
            gid=self.gid,
            rlimits=rlimits(pol, timeout, self.uid),
            isolate_network=pol.isolate_network and self._root,
            landlock=pol.landlock,
            read_paths=allowed if pol.restrict_reads else None,
            reach_paths=allowed,
            write_paths=[str(self.workdir), *pol.write_paths],
            preload=list(pol.preload),
            seccomp_sockets=pol.block_sockets,
            seccomp_no_fork=pol.no_fork,
            seccomp_stoppable=stoppable,
            seccomp_pdeathsig=pol.lock_pdeathsig,
            cpus=list(pol.cpus),
            status_fd=status_w,
            require=required_isolation(extra),
        )
        result_path.unlink(missing_ok=True)  # never read an earlier run's report
        spec_path = self._outer / "spec.msgpack"
        spec_path.write_bytes(msgspec.msgpack.encode(spec))
        log_path = self._outer / "child.log"
        env = scrub_env(extra={**SINGLE_THREADED_POOLS, **pol.env, **(extra_env or {})})
        env.update(
            {
                "HOME": str(self.workdir),
                "TMPDIR": str(self.workdir),
                "PYTHONNOUSERSITE": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join([str(PACKAGES_ROOT), *pol.python_path]),
            }
        )
        t0 = time.perf_counter()
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", CHILD_MODULE, str(spec_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log if pol.keep_stdout else subprocess.DEVNULL,
                    stderr=log,
                    env=env,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(status_w, *pass_fds),
                )
        finally:
            os.close(status_w)
        cancel.adopt(proc)  # the child of the work of this context (`cancel.py`): stopped with it
        return Launched(proc=proc, t0=t0, log_path=log_path, result_path=result_path, status_fd=status_r)

    def _collect(self, child: Launched, timed_out: bool, timeout: float) -> SandboxOutcome:
        return collect(
            child,
            timed_out,
            timeout,
            uid=self.uid,
            workdir_limit=self.workdir_limit,
            log_bytes=self.policy.log_bytes,
        )


def isolation_problem() -> str | None:
    """Why LLM-written code could not run here (the required isolation is missing and the
    run does not allow that), or None: one do-nothing child, before a run starts."""
    if unisolated_allowed():
        return None
    out = run_sandboxed("hardware_agents.sandbox.probe:nothing", policy=SandboxPolicy(wall_timeout_s=60))
    if out.status == "unisolated":
        return out.error
    if out.status != "ok":
        return f"the sandbox does not work on this machine ({out.status}: {out.error})"
    return None


def run_sandboxed(
    target: str,
    payload: bytes | msgspec.Struct = b"",
    *,
    policy: SandboxPolicy | None = None,
    files: dict[str, bytes] | None = None,
) -> SandboxOutcome:
    """One-shot helper: stage `files` into a fresh sandbox, run `target`, clean up."""
    with Sandbox(policy) as box:
        for rel, data in (files or {}).items():
            p = box.workdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            box.give(rel)
        return box.run(target, payload)
