"""Run a trusted harness function in a locked-down child process, with untrusted code inside.

Usage::

    with Sandbox(SandboxPolicy(wall_timeout_s=30)) as box:
        (box.workdir / "src.c").write_text(...); box.give("src.c")       # stage inputs
        out = box.run("hardware_agents.cpu.compiler:compile_in_child", request)  # run to the end
        if out.status == "ok":
            result = out.decode(CompileOutput)
            data = box.read_file("kernel.so", max_bytes=...)  # files the child wrote
        child = box.spawn("hardware_agents.cpu.server:serve", request, pass_fds=(...))  # driven

The child is `python -m hardware_agents._sandbox_child`; it imports the target module,
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
- System calls: a seccomp filter (`hardware_agents.seccomp`) refuses socket() of every
  family (UDP and pathname unix sockets included), ptrace and namespace/mount calls,
  clearing the parent-death signal, for kernel servers new processes (threads only), and,
  for every child the parent stops and continues (`spawn`), whatever could continue it
  while stopped or widen its CPU mask (profile `stoppable`).
- The freeze: a spawned child is stopped between the parent's commands, and the parent
  checks that it stayed stopped (`hardware_agents.freeze`: the CPU time of every process of
  the sandbox read at the stop and again before the continue, the state, no foreign
  continue); `SandboxChild.resume` raises `RanWhileStopped` otherwise.
- Fails closed: the child reports the isolation it applied on a pipe before any untrusted
  code exists in it (that report is the only one believed), and refuses to go on when the
  required isolation (filesystem and network, see `required_isolation`) is missing; the
  outcome's status is then `unisolated`. `allow_unisolated(True)` (the run config's
  `sandbox.allow_unisolated`) lifts the requirement, and the outcome's `isolation` still
  records what was (not) applied.
- Network: a new network namespace (unshare(CLONE_NEWNET), as root, before the uid drop);
  best effort, recorded in `isolation`.
- Limits: RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC (per sandbox uid), RLIMIT_FSIZE,
  RLIMIT_CORE=0; a wall-clock timeout after which the whole process group, and every
  process of the sandbox uid, is SIGKILLed; the CPU affinity the policy gives (`cpus`).
- The work dir is a fresh 0700 directory owned by the sandbox uid, removed afterwards. As
  root it is a tmpfs of its own capped at `workdir_bytes` (and 16384 files): a kernel
  cannot fill the machine's RAM through /dev/shm. Files the child leaves are read with
  O_NOFOLLOW and a size cap.
- Orphans: a sandbox uid belongs to the process that holds its lock
  (`hardware_agents.sandbox_uids`); the first sandbox of every process kills the
  processes of sandbox uids whose owner died (SIGKILL of the agent leaves them to init).

Not root: no uid drop (RLIMIT_NPROC then counts all of the user's processes, so it is set
relative to their current count), no network namespace, no tmpfs work dir (recorded as
`workdir: unbounded` in the isolation), and the freeze covers the child's session rather
than a uid; Landlock and seccomp still apply.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

import msgspec

from hardware_agents import sandbox_uids
from hardware_agents._sandbox_child import ChildReport, ChildSpec
from hardware_agents.freeze import FreezeBreach, Freezer, RanWhileStopped
from hardware_agents.sandbox_uids import kill_uid, pids_of_uid, sweep_orphans

__all__ = [
    "FreezeBreach",
    "RanWhileStopped",
    "Sandbox",
    "SandboxChild",
    "SandboxOutcome",
    "SandboxPolicy",
    "kill_uid",
    "pids_of_uid",
    "sweep_orphans",
]

T = TypeVar("T")

SandboxStatus = Literal["ok", "error", "crashed", "timeout", "cpu_limit", "unisolated"]

REQUIRED_ISOLATION: tuple[str, ...] = ("filesystem", "network")
_allow_unisolated: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "accelopt_allow_unisolated",
    default=os.environ.get("ACCELOPT_ALLOW_UNISOLATED", "") in ("1", "true", "yes"),
)


@contextlib.contextmanager
def allow_unisolated(allowed: bool) -> Iterator[None]:
    """Within this context (and threads started by asyncio.to_thread from it), sandboxes run
    untrusted code even where filesystem or network isolation cannot be applied."""
    token = _allow_unisolated.set(allowed)
    try:
        yield
    finally:
        _allow_unisolated.reset(token)


def required_isolation(extra: tuple[str, ...] = ()) -> list[str]:
    """What a sandbox must apply before untrusted code runs, given the current setting."""
    return [] if _allow_unisolated.get() else [*REQUIRED_ISOLATION, *extra]


def unisolated_allowed() -> bool:
    return _allow_unisolated.get()


_ENV_ALLOW = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH"}
_ENV_ALLOW_PREFIXES = ("LC_",)
_SECRET_RE = re.compile(
    r"(_API_KEY$|_APIKEY$|_TOKEN$|^TOKEN$|SECRET|PASSWORD|PASSWD|CREDENTIAL|_AUTH$|PRIVATE_KEY"
    r"|^AWS_|^OPENAI|^ANTHROPIC|^HF_TOKEN|^HUGGING_FACE_HUB_TOKEN|^GITHUB_TOKEN|^GH_TOKEN"
    r"|^AZURE_|^GOOGLE_APPLICATION|^GEMINI|^COHERE|^MISTRAL|^GROQ|^TOGETHER|^DEEPSEEK|^XAI_"
    r"|^LITELLM_(?!LOCAL_MODEL_COST_MAP)|^SSH_AUTH|^GPG_)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_RE.search(name))


def scrub_env(
    environ: dict[str, str] | os._Environ[str] | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The child's environment: allowlisted basics of `environ` plus `extra`, minus secrets."""
    src = os.environ if environ is None else environ
    env = {
        k: v
        for k, v in src.items()
        if (k in _ENV_ALLOW or k.startswith(_ENV_ALLOW_PREFIXES)) and not is_secret_name(k)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    for k, v in (extra or {}).items():
        if is_secret_name(k):
            raise ValueError(f"refusing to pass {k!r} into a sandbox: it looks like a secret")
        env[k] = v
    return env


class SandboxPolicy(msgspec.Struct, frozen=True, kw_only=True):
    wall_timeout_s: float = 60.0
    cpu_seconds: int | None = None  # default: wall timeout x cores + 5
    address_space_bytes: int = 4 << 30
    max_processes: int = 64  # processes + threads of the sandbox uid
    max_file_bytes: int = 1 << 30
    isolate_network: bool = True
    drop_privileges: bool = True  # as root: run as a fresh unprivileged uid
    landlock: bool = True
    restrict_reads: bool = True  # Landlock reads only beneath default + read_paths
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()  # beyond the work dir (e.g. device nodes such as /dev/neuron0)
    python_path: tuple[str, ...] = ()  # appended to the child's PYTHONPATH (and readable)
    env: dict[str, str] = {}
    preload: tuple[str, ...] = ()  # modules imported before the privilege drop
    log_bytes: int = 64 * 1024  # how much of the child's stderr the parent keeps (the head)
    block_sockets: bool = True  # seccomp: socket() of any family fails
    no_fork: bool = False  # seccomp: threads only, no new processes (kernel servers)
    stoppable: bool = True  # seccomp profile `stoppable` for spawned (stopped) children; required
    lock_pdeathsig: bool = True  # seccomp: prctl(PR_SET_PDEATHSIG) fails (the child dies with its parent)
    cpus: tuple[int, ...] = ()  # CPU affinity of the child (empty: the parent's)
    workdir_bytes: int = 512 << 20  # size cap of the work dir (its own tmpfs, as root); 0: none
    keep_stdout: bool = False  # the child's stdout joins the log (else it is discarded)


class SandboxOutcome(msgspec.Struct, kw_only=True):
    """What happened to one child run. `payload` is the harness's msgpack result (status ok)."""

    status: SandboxStatus
    payload: bytes = b""
    error: str = ""
    error_type: str = ""
    returncode: int | None = None
    signal: str | None = None
    wall_s: float = 0.0
    log: str = ""
    stray_processes: int = 0
    isolation: dict[str, str] = {}
    freeze_breach: FreezeBreach | None = None  # a driven child ran while it was held stopped

    def decode(self, kind: type[T]) -> T:
        return msgspec.msgpack.decode(self.payload, type=kind)


_SYSTEM_TREES = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/sys")
# our own packages a harness may import lazily (their source is public; nothing else of the
# checkout is readable: not runs/, the memory, tests/ or the repo's other files)
TRUSTED_PACKAGES = ("hardware_agents", "accelopt")


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
    root = Path(__file__).resolve().parent.parent
    paths += [str(root / pkg) for pkg in TRUSTED_PACKAGES]
    return sorted({os.path.realpath(p) for p in paths})


_SCRUB_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,}|[A-Za-z0-9+/]{40,}={0,2})"
)


def scrub_output(raw: bytes, *, max_lines: int = 40, max_chars: int = 4000) -> str:
    """What of a kernel's own output may go back to an LLM: the first lines, printable text
    only, long opaque tokens (keys, base64 dumps) redacted, bounded in lines and characters."""
    text = raw.decode("utf-8", "replace")
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in text)
    lines = text.splitlines()
    cut = len(lines) > max_lines
    text = "\n".join(_SCRUB_SECRET.sub("[redacted]", ln[:400]) for ln in lines[:max_lines])
    if len(text) > max_chars:
        text, cut = text[:max_chars], True
    return text + ("\n[... output truncated ...]" if cut else "")


def default_base_dir() -> Path:
    env = os.environ.get("ACCELOPT_SANDBOX_DIR")
    if env:
        return Path(env)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


_swept: set[tuple[str, str]] = set()
_STALE_DIR = re.compile(r"^(?P<prefix>accelopt-[a-z-]+-)(?P<pid>\d+)-")


def private_dir(base: Path, prefix: str) -> Path:
    """mkdtemp named `<prefix><pid>-XXXX`; the first call per (base, prefix) in a process also
    removes such dirs whose owning process is gone (a SIGKILLed agent, e.g. a Ray worker at
    shutdown, runs no cleanup). Assumes the base dir is not shared across PID namespaces
    (true of /dev/shm, which is per IPC namespace, and of a private temp dir)."""
    base.mkdir(parents=True, exist_ok=True)
    key = (str(base), prefix)
    if key not in _swept:
        _swept.add(key)
        for entry in os.listdir(base):
            m = _STALE_DIR.match(entry)
            if m and m.group("prefix") == prefix and not os.path.exists(f"/proc/{m.group('pid')}"):
                _umount(base / entry / "work")  # a sandbox's tmpfs, if it had one
                shutil.rmtree(base / entry, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


_MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MNT_DETACH = 2, 4, 32, 2
_WORKDIR_FILES = 16384
_libc = ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, size: int, uid: int | None) -> str | None:
    """Mount a tmpfs of `size` bytes on `path` (owned by `uid`); None, or why it failed."""
    opts = f"size={size},nr_inodes={_WORKDIR_FILES},mode=0700"
    if uid is not None:
        opts += f",uid={uid},gid={uid}"
    if (
        _libc.mount(b"accelopt-sandbox", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode())
        != 0
    ):
        return os.strerror(ctypes.get_errno())
    return None


def _umount(path: Path) -> None:
    if os.path.ismount(path):
        _libc.umount2(os.fsencode(path), _MNT_DETACH)


def _count_own_processes() -> int:
    return len(pids_of_uid(os.getuid()))


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for the child to exit (True) or the timeout (False), without polling: a pidfd
    becomes readable when the process exits (Linux >= 5.3); else Popen's polling wait."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        return False
    proc.wait()
    return True


def open_child_file(path: Path, max_bytes: int) -> int:
    """An fd for a file the child may have written: no symlinks, regular file, bounded size."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        raise OSError(errno.EFBIG, f"{path}: {st.st_size} bytes exceeds the limit of {max_bytes}")
    return fd


def read_file_safely(path: Path, max_bytes: int) -> bytes:
    """Read a file the child may have written: no symlinks, regular files only, bounded."""
    with os.fdopen(open_child_file(path, max_bytes), "rb") as f:
        return f.read(max_bytes + 1)


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
        sandbox_uids.sweep_once()  # orphans of agents that died: once per process
        self._lease = sandbox_uids.allocate() if self._root and self.policy.drop_privileges else None
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
        why = _mount_tmpfs(self.workdir, size, self.uid)
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
        _umount(self.workdir)
        shutil.rmtree(self._outer, ignore_errors=True)

    def resize_workdir(self, size: int) -> str:
        """Re-cap the work dir's tmpfs at `size` bytes (a child started ahead of need gets the
        cap of the work it is given; never below what it holds); what was done, for the record."""
        if not self.workdir_limit.startswith("tmpfs"):
            return self.workdir_limit
        used = sum(f.stat().st_size for f in self.workdir.rglob("*") if f.is_file() and not f.is_symlink())
        size = max(size, used + (64 << 20))
        opts = f"size={size},nr_inodes={_WORKDIR_FILES}".encode()
        if (
            _libc.mount(
                b"accelopt-sandbox",
                os.fsencode(self.workdir),
                b"tmpfs",
                _MS_REMOUNT | _MS_NOSUID | _MS_NODEV,
                opts,
            )
            != 0
        ):
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
        return read_file_safely(self.workdir / relpath, max_bytes)

    def open_file(self, relpath: str, max_bytes: int) -> BinaryIO:
        """A binary file object for a file the child wrote (see `open_child_file`)."""
        return os.fdopen(open_child_file(self.workdir / relpath, max_bytes), "rb")

    def _rlimits(self, timeout: float) -> dict[str, tuple[int, int]]:
        """(soft, hard) pairs. CPU: SIGXCPU at the soft limit, SIGKILL a second later."""
        pol = self.policy
        cpu = pol.cpu_seconds or int(timeout * (os.cpu_count() or 1) + 5)
        nproc = pol.max_processes
        if self.uid is None:
            nproc += _count_own_processes()
        return {
            "RLIMIT_CPU": (cpu, cpu + 1),
            "RLIMIT_AS": (pol.address_space_bytes,) * 2,
            "RLIMIT_NPROC": (nproc, nproc),
            "RLIMIT_FSIZE": (pol.max_file_bytes,) * 2,
            "RLIMIT_CORE": (0, 0),
        }

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
        timed_out = not _wait_exit(child.proc, timeout)
        if timed_out:
            self._kill_all(child.proc)
            child.proc.wait()
        return self._finish(child, timed_out, timeout)

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
    ) -> _Launched:
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
            rlimits=self._rlimits(timeout),
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
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env = scrub_env(extra={**pol.env, **(extra_env or {})})
        env.update(
            {
                "HOME": str(self.workdir),
                "TMPDIR": str(self.workdir),
                "PYTHONNOUSERSITE": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join([pkg_root, *pol.python_path]),
            }
        )
        t0 = time.perf_counter()
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "hardware_agents._sandbox_child", str(spec_path)],
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
        return _Launched(proc=proc, t0=t0, log_path=log_path, result_path=result_path, status_fd=status_r)

    def _finish(self, child: _Launched, timed_out: bool, timeout: float) -> SandboxOutcome:
        """Collect a child that has exited (or was killed): status, log, isolation."""
        proc = child.proc
        wall = time.perf_counter() - child.t0
        stray = 0
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # grandchildren left in the group
        except (ProcessLookupError, PermissionError):
            pass
        if self.uid is not None:
            stray = kill_uid(self.uid)
        isolation = {**child.isolation(), "workdir": self.workdir_limit}
        log_text = self._log_head(child.log_path)
        rc = proc.returncode
        sig = signal.Signals(-rc).name if rc is not None and rc < 0 else None

        def outcome(
            status: SandboxStatus, error: str = "", *, error_type: str = "", payload: bytes = b""
        ) -> SandboxOutcome:
            return SandboxOutcome(
                status=status,
                error=error,
                error_type=error_type,
                payload=payload,
                returncode=rc,
                signal=sig,
                wall_s=wall,
                log=log_text,
                stray_processes=stray,
                isolation=isolation,
            )

        if timed_out:
            return outcome("timeout", f"wall-clock timeout after {timeout:.1f} s")
        if sig == "SIGXCPU":
            return outcome("cpu_limit", "CPU time limit exceeded")
        report = self._read_report(child.result_path)
        if report is None:
            what = f"killed by {sig}" if sig else f"exited with code {rc} without a result"
            if sig == "SIGXFSZ":
                what += " (file size limit)"
            return outcome("crashed", what)
        if report.error_type == "IsolationUnavailable" and not isolation.get("_untrusted"):
            return outcome("unisolated", unisolated_message(report.error))
        if sig is not None:
            return outcome("crashed", f"killed by {sig} after reporting")
        if not report.ok:
            return outcome("error", report.error, error_type=report.error_type)
        return outcome("ok", payload=report.payload)

    def _kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.uid is not None:
            kill_uid(self.uid)

    def _read_report(self, path: Path) -> ChildReport | None:
        try:
            data = read_file_safely(path, 256 << 20)
            return msgspec.msgpack.decode(data, type=ChildReport)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _log_head(self, path: Path) -> str:
        try:
            with open(path, "rb") as f:
                data = f.read(self.policy.log_bytes)
        except OSError:
            return ""
        return scrub_output(data)


def unisolated_message(detail: str) -> str:
    return (
        f"refusing to run LLM-written code: {detail}. Run where Landlock and seccomp are available "
        "(Linux >= 5.13 with Landlock enabled), or accept the risk with `--set sandbox.allow_unisolated=true` "
        "(recorded in every profile and the report)"
    )


class _Launched:
    """A started child: its process, clock start, files, and the status pipe's read end."""

    def __init__(
        self, *, proc: subprocess.Popen[bytes], t0: float, log_path: Path, result_path: Path, status_fd: int
    ) -> None:
        self.proc, self.t0, self.log_path, self.result_path = proc, t0, log_path, result_path
        self._status_fd: int | None = status_fd
        self._isolation: dict[str, str] | None = None

    def isolation(self, wait_s: float = 0.0) -> dict[str, str]:
        """The isolation the child reported before any untrusted code ran: a length-prefixed
        msgpack map written once, then the pipe closed. `_untrusted` marks a missing or
        malformed report (the child died first, or something else wrote)."""
        if self._isolation is not None:
            return self._isolation
        fd = self._status_fd
        data = b""
        if fd is not None:
            try:
                deadline = time.monotonic() + wait_s
                while True:
                    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                    if not ready:
                        break
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    data += chunk
                    if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "little"):
                        break
            finally:
                os.close(fd)
                self._status_fd = None
        try:
            n = int.from_bytes(data[:4], "little")
            iso = (
                msgspec.msgpack.decode(data[4 : 4 + n], type=dict[str, str])
                if len(data) == 4 + n and n
                else None
            )
        except (msgspec.DecodeError, msgspec.ValidationError):
            iso = None
        self._isolation = iso if iso is not None else {"_untrusted": "no isolation report"}
        return self._isolation

    def close(self) -> None:
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None


class SandboxChild:
    """A spawned sandboxed child the parent drives with SIGSTOP/SIGCONT (see
    `hardware_agents.cpu.runner`): it stops itself when it is ready or done with a command,
    and the parent continues it. The parent's clock runs from `resume` to the stop.

    The freeze (`hardware_agents.freeze`): at every stop `wait_stopped` reads the CPU time of
    every process of the sandbox (freezing the others too where the sandbox may fork);
    `resume` reads them again first and, if anything ran in between, kills the child,
    records `freeze_breach` and raises `RanWhileStopped`. `check_frozen()` is that check
    alone (e.g. after reading outputs at the last stop); `finish` runs it too when the child
    is still held stopped, so `finish().freeze_breach` covers the time after the last stop.
    `last_run_cpu_s` is the CPU time the sandbox used from the last `resume` to the stop
    that followed (every thread: more than wall x cores given means cores it was not given).

    A timed interval is `t0 = resume()` to `stopped_at` (the perf_counter reading taken as
    soon as the stop was reported, before the freeze readings): the freeze bookkeeping on both
    sides stays outside it.
    """

    def __init__(self, box: Sandbox, launched: _Launched, timeout_s: float) -> None:
        self.box, self._l, self.timeout_s = box, launched, timeout_s
        self.deadline = launched.t0 + timeout_s
        self.exit_status: int | None = None  # raw wait status once it has exited
        self.timed_out = False  # killed at its wall-clock deadline
        self.freeze_breach: FreezeBreach | None = None
        self._freezer: Freezer | None = None
        self._expect_continue = False  # a continue report may be ours (after `resume`)
        self.stopped_at = 0.0  # perf_counter when the last stop was reported: a timed interval ends there
        self._outcome: SandboxOutcome | None = None

    @property
    def pid(self) -> int:
        return self._l.proc.pid

    @property
    def held(self) -> bool:
        """Stopped, its stop already reported to us, and not continued since."""
        return self._freezer is not None and self._freezer.holding and self.exit_status is None

    @property
    def last_run_cpu_s(self) -> float | None:
        return self._freezer.last_run_cpu_s if self._freezer is not None else None

    @property
    def freeze_scope(self) -> str:
        """What the freeze covers: "process" (the sandbox cannot fork), "uid" (every process of
        the sandbox uid) or "session" (not root: the processes of the child's session)."""
        if "no_fork" in self._l.isolation(wait_s=2.0).get("seccomp", "").split(","):
            return "process"
        return "uid" if self.box.uid is not None else "session"

    def isolation(self) -> dict[str, str]:
        """The isolation the child reported, plus what the parent applied around it."""
        return {
            **self._l.isolation(wait_s=2.0),
            "workdir": self.box.workdir_limit,
            "freeze": self._freeze_record(),
        }

    def _freeze_record(self) -> str:
        exact = self._freezer is None or self._freezer.exact
        return self.freeze_scope + ("" if exact else " (stop readings within a scheduler tick)")

    def _sandbox_pids(self) -> set[int]:
        if self.box.uid is not None:
            return set(pids_of_uid(self.box.uid))
        return sandbox_uids.pids_of_session(self.pid)

    def wait_stopped(self) -> bool:
        """Block until the child stops (True) or exits, or its wall-clock deadline passes
        (False: it has been killed; see `finish`). A watchdog kills it at the deadline so the
        blocking wait returns. At a stop the freeze readings are taken."""
        if self.exit_status is not None:
            return False
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0:
            self._expire()
        watchdog = threading.Timer(max(remaining, 0.0), self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            while True:
                try:
                    pid, status = os.waitpid(self.pid, os.WUNTRACED | os.WCONTINUED)
                except ChildProcessError:
                    self.exit_status = 0
                    return False
                if pid != self.pid:
                    continue
                self.stopped_at = time.perf_counter()
                if self.freeze_breach is not None and (os.WIFSTOPPED(status) or os.WIFCONTINUED(status)):
                    continue  # killed: wait for its end
                if not os.WIFCONTINUED(status):
                    break
                if self._expect_continue:  # our own `resume`
                    self._expect_continue = False
                    continue
                # continued by someone else: a stop of its own may have been lost with it (a
                # stop report is gone once the process runs again), and waiting for the next
                # would hang
                self.freeze_breach = FreezeBreach(
                    reason="continued",
                    pid=self.pid,
                    detail="it was continued by a signal that was not the parent's (its stop was cut short)",
                )
                self.kill()
        finally:
            watchdog.cancel()
        self._expect_continue = False
        if os.WIFSTOPPED(status) and self.freeze_breach is None:
            if self._freezer is None:
                self._freezer = Freezer(self.pid, self.freeze_scope, self._sandbox_pids)
            self._freezer.stopped()
            return True
        self._exited(status)
        return False

    def _exited(self, status: int) -> None:
        self.exit_status = status
        self._l.proc.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def check_frozen(self) -> FreezeBreach | None:
        """Whether the sandbox ran since the child's last stop (None: it did not, or it is not
        held stopped). Does not continue or kill it."""
        fz = self._freezer
        if fz is None or not fz.holding or self.exit_status is not None:
            return None
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            pid, status = 0, 0
        pending = None
        if pid == self.pid:
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                self._exited(status)
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                    return None  # killed (the deadline, the OOM killer): nothing it did counts
                return FreezeBreach(
                    reason="state",
                    pid=self.pid,
                    detail=f"it exited while it was held stopped (wait status {status:#x})",
                )
            pending = status
        return fz.check(pending)

    def resume(self) -> float:
        """Continue the child (and, where it may fork, the sandbox's other processes it froze).
        Returns the perf_counter reading taken just before the continue: a timed interval
        starts there, after the freeze check. Raises `RanWhileStopped` (the child killed) if
        anything of the sandbox ran while it was held stopped."""
        breach = self.check_frozen()
        if breach is not None:
            self.freeze_breach = breach
            self.kill()
            raise RanWhileStopped(breach)
        self._expect_continue = True
        if self.exit_status is not None or self._freezer is None:
            t = time.perf_counter()
            if self.exit_status is None:
                os.kill(self.pid, signal.SIGCONT)
            return t
        return self._freezer.continue_all()

    def restart_clock(self, timeout_s: float) -> None:
        """Start the child's wall-clock allowance (and the outcome's wall time) now: a child
        started ahead of need and held stopped until it is given its work."""
        self._l.t0 = time.perf_counter()
        self.timeout_s = timeout_s
        self.deadline = self._l.t0 + timeout_s

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)

    def _expire(self) -> None:
        if self.exit_status is None:
            self.timed_out = True
            self.kill()

    def finish(self) -> SandboxOutcome:
        """Kill the child if it still runs, reap it, and describe what happened (with
        `freeze_breach` if it ran while held stopped, after its last stop included)."""
        if self._outcome is not None:
            return self._outcome
        if self.freeze_breach is None:
            self.freeze_breach = self.check_frozen()
        timed_out = self.timed_out
        if self.exit_status is None:
            self.kill()
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(self.pid, 0)
                self._exited(status)
        out = self.box._finish(self._l, timed_out, self.timeout_s)
        out.isolation["freeze"] = self._freeze_record()
        out.freeze_breach = self.freeze_breach
        self._outcome = out
        self._l.close()
        return out


def isolation_problem() -> str | None:
    """Why LLM-written code could not run here (the required isolation is missing and the
    run does not allow that), or None: one do-nothing child, before a run starts."""
    if unisolated_allowed():
        return None
    out = run_sandboxed("hardware_agents._probe:nothing", policy=SandboxPolicy(wall_timeout_s=60))
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
