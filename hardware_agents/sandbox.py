"""Run a trusted harness function in a locked-down child process, with untrusted code inside.

Usage::

    with Sandbox(SandboxPolicy(wall_timeout_s=30)) as box:
        (box.workdir / "kernel.so").write_bytes(...)        # stage inputs
        out = box.run("hardware_agents.cpu.harness:run_kernel", request)   # msgspec Struct
        if out.status == "ok":
            result = out.decode(HarnessResult)
            data = box.read_file("out/y.npy", max_bytes=...)  # files the harness wrote

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
  /dev/null & co.) and, by default, reads to system trees (/usr, /lib, /etc, /proc, /sys,
  /opt), the Python installation and paths the policy adds (not /root, /home, /tmp, /dev/shm); TCP connect/bind is blocked (ABI >= 4), and so are signals and
  abstract unix sockets outside the sandbox (ABI >= 6). Landlock needs no privilege and
  cannot be undone by the child. If the kernel lacks it the run continues without it and
  the outcome's `isolation` says so.
- Network: a new network namespace (unshare(CLONE_NEWNET), as root, before the uid drop);
  best effort, recorded in `isolation`.
- Limits: RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CORE=0; a wall-clock
  timeout after which the whole process group, and every process of the sandbox uid, is
  SIGKILLed.
- The work dir is a fresh 0700 directory owned by the sandbox uid, removed afterwards.
  Files the child leaves are read with O_NOFOLLOW and a size cap.

Not root: no uid drop (RLIMIT_NPROC then counts all of the user's processes, so it is set
relative to their current count), no network namespace; Landlock still applies.
"""

from __future__ import annotations

import errno
import itertools
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
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

import msgspec

from hardware_agents._sandbox_child import ChildReport, ChildSpec

T = TypeVar("T")

SandboxStatus = Literal["ok", "error", "crashed", "timeout", "cpu_limit"]

_ENV_ALLOW = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH"}
_ENV_ALLOW_PREFIXES = ("LC_",)
_SECRET_RE = re.compile(
    r"(_API_KEY$|_APIKEY$|_TOKEN$|^TOKEN$|SECRET|PASSWORD|PASSWD|CREDENTIAL|_AUTH$|PRIVATE_KEY"
    r"|^AWS_|^OPENAI|^ANTHROPIC|^HF_TOKEN|^HUGGING_FACE_HUB_TOKEN|^GITHUB_TOKEN|^GH_TOKEN"
    r"|^AZURE_|^GOOGLE_APPLICATION|^GEMINI|^COHERE|^MISTRAL|^GROQ|^TOGETHER|^DEEPSEEK|^XAI_"
    r"|^LITELLM_(?!LOCAL_MODEL_COST_MAP)|^SSH_AUTH|^GPG_)",
    re.IGNORECASE,
)

# Sandbox uids: a private range no real account uses; one uid per concurrent run.
_UID_BASE = 0x3A000000
_UID_SPAN = 1 << 20
_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()
_uid_counter = itertools.count()


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_RE.search(name))


def scrub_env(environ: dict[str, str] | os._Environ[str] | None = None,
              extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: allowlisted basics of `environ` plus `extra`, minus secrets."""
    src = os.environ if environ is None else environ
    env = {k: v for k, v in src.items()
           if (k in _ENV_ALLOW or k.startswith(_ENV_ALLOW_PREFIXES)) and not is_secret_name(k)}
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
    log_tail_bytes: int = 64 * 1024


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

    def decode(self, kind: type[T]) -> T:
        return msgspec.msgpack.decode(self.payload, type=kind)


def default_read_paths() -> list[str]:
    """System trees, the Python installation, and where our packages live."""
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys"]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["purelib"],
              sysconfig.get_paths()["platlib"]]
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    paths.append(str(Path(__file__).resolve().parent.parent))
    return sorted({os.path.realpath(p) for p in paths})


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
                shutil.rmtree(base / entry, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


def _proc_status(pid: str) -> tuple[tuple[int, ...], bytes] | None:
    """(uids, state letter) of a process, None if it is gone."""
    uids, state = None, b"?"
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:"):
                    state = line.split()[1]
                elif line.startswith(b"Uid:"):
                    uids = tuple(int(x) for x in line.split()[1:])
                    break
    except OSError:
        return None
    return (uids, state) if uids is not None else None


def _proc_uids(pid: str) -> tuple[int, ...] | None:
    st = _proc_status(pid)
    return st[0] if st else None


def pids_of_uid(uid: int, *, zombies: bool = False) -> list[int]:
    """Processes of `uid`; zombies (dead, waiting for init to reap them) only if asked."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_status(entry)
            if st and uid in st[0] and (zombies or st[1] not in (b"Z", b"X")):
                out.append(int(entry))
    return out


def kill_uid(uid: int, rounds: int = 100) -> int:
    """SIGKILL every live process of `uid` until none is left; returns how many there were."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = pids_of_uid(uid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    return len(killed)


def _allocate_uid() -> int:
    with _uid_lock:
        for _ in range(1000):
            uid = _UID_BASE + (os.getpid() * 7919 + next(_uid_counter)) % _UID_SPAN
            if uid not in _uids_in_use and not pids_of_uid(uid):
                _uids_in_use.add(uid)
                return uid
    raise RuntimeError("no free sandbox uid")


def _release_uid(uid: int) -> None:
    with _uid_lock:
        _uids_in_use.discard(uid)


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

    def __init__(self, policy: SandboxPolicy | None = None, *, base_dir: Path | None = None,
                 prefix: str = "accelopt-sbx-") -> None:
        self.policy = policy or SandboxPolicy()
        self._root = os.geteuid() == 0
        self.uid: int | None = None
        self.gid: int | None = None
        if self._root and self.policy.drop_privileges:
            self.uid = self.gid = _allocate_uid()
        self._outer = private_dir(base_dir or default_base_dir(), prefix)  # 0700, ours: the log lives here
        self.workdir = self._outer / "work"
        self.workdir.mkdir(mode=0o700)
        (self.workdir / ".sandbox").mkdir(mode=0o700)
        if self.uid is not None:
            os.chmod(self._outer, 0o711)  # the child may traverse to its work dir, not list ours
            os.chown(self.workdir, self.uid, self.gid)
            os.chown(self.workdir / ".sandbox", self.uid, self.gid)
        self._closed = False

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.uid is not None:
            kill_uid(self.uid)
            _release_uid(self.uid)
        shutil.rmtree(self._outer, ignore_errors=True)

    def give(self, relpath: str) -> Path:
        """Make a staged file or dir (created by the parent) readable by the child."""
        p = self.workdir / relpath
        if self.uid is not None:
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
        return {"RLIMIT_CPU": (cpu, cpu + 1), "RLIMIT_AS": (pol.address_space_bytes,) * 2,
                "RLIMIT_NPROC": (nproc, nproc), "RLIMIT_FSIZE": (pol.max_file_bytes,) * 2,
                "RLIMIT_CORE": (0, 0)}

    def run(self, target: str, payload: bytes | msgspec.Struct = b"", *,
            timeout_s: float | None = None, extra_env: dict[str, str] | None = None) -> SandboxOutcome:
        """Run `target(payload, workdir)` ("pkg.module:function") in a sandboxed child."""
        pol = self.policy
        timeout = timeout_s if timeout_s is not None else pol.wall_timeout_s
        raw = payload if isinstance(payload, bytes) else msgspec.msgpack.encode(payload)
        result_path = self.workdir / ".sandbox" / "result.msgpack"
        spec = ChildSpec(
            target=target, payload=raw, workdir=str(self.workdir), result_path=str(result_path),
            uid=self.uid, gid=self.gid, rlimits=self._rlimits(timeout),
            isolate_network=pol.isolate_network and self._root,
            landlock=pol.landlock,
            read_paths=([*default_read_paths(), str(self.workdir), *pol.read_paths, *pol.python_path]
                        if pol.restrict_reads else None),
            write_paths=[str(self.workdir), *pol.write_paths], preload=list(pol.preload),
        )
        result_path.unlink(missing_ok=True)  # never read an earlier run's report
        spec_path = self._outer / "spec.msgpack"
        spec_path.write_bytes(msgspec.msgpack.encode(spec))
        log_path = self._outer / "child.log"
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env = scrub_env(extra={**pol.env, **(extra_env or {})})
        env.update({"HOME": str(self.workdir), "TMPDIR": str(self.workdir), "PYTHONNOUSERSITE": "1",
                    "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.pathsep.join([pkg_root, *pol.python_path])})
        t0 = time.perf_counter()
        timed_out = False
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hardware_agents._sandbox_child", str(spec_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd="/", start_new_session=True, close_fds=True,
            )
            if not _wait_exit(proc, timeout):
                timed_out = True
                self._kill_all(proc)
                proc.wait()
        wall = time.perf_counter() - t0
        stray = 0
        with_uid = self.uid is not None
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # grandchildren left in the group
        except (ProcessLookupError, PermissionError):
            pass
        if with_uid:
            stray = kill_uid(self.uid)  # type: ignore[arg-type]
        log_text = self._log_tail(log_path)
        rc = proc.returncode
        sig = signal.Signals(-rc).name if rc is not None and rc < 0 else None
        base = {"returncode": rc, "signal": sig, "wall_s": wall, "log": log_text, "stray_processes": stray}
        if timed_out:
            return SandboxOutcome(status="timeout", error=f"wall-clock timeout after {timeout:.1f} s", **base)
        if sig == "SIGXCPU":
            return SandboxOutcome(status="cpu_limit", error="CPU time limit exceeded", **base)
        report = self._read_report(result_path)
        if report is None:
            what = f"killed by {sig}" if sig else f"exited with code {rc} without a result"
            if sig == "SIGXFSZ":
                what += " (file size limit)"
            return SandboxOutcome(status="crashed", error=what, **base)
        if sig is not None:
            return SandboxOutcome(status="crashed", error=f"killed by {sig} after reporting",
                                  isolation=report.isolation, **base)
        if not report.ok:
            return SandboxOutcome(status="error", error=report.error, error_type=report.error_type,
                                  isolation=report.isolation, **base)
        return SandboxOutcome(status="ok", payload=report.payload, isolation=report.isolation, **base)

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

    def _log_tail(self, path: Path) -> str:
        n = self.policy.log_tail_bytes
        try:
            size = path.stat().st_size
            with open(path, "rb") as f:
                if size > n:
                    f.seek(size - n)
                data = f.read(n)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        return ("[... log truncated ...]\n" + text) if size > n else text


def run_sandboxed(target: str, payload: bytes | msgspec.Struct = b"", *, policy: SandboxPolicy | None = None,
                  files: dict[str, bytes] | None = None) -> SandboxOutcome:
    """One-shot helper: stage `files` into a fresh sandbox, run `target`, clean up."""
    with Sandbox(policy) as box:
        for rel, data in (files or {}).items():
            p = box.workdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            box.give(rel)
        return box.run(target, payload)
