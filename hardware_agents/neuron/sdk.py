"""Finding the AWS Neuron SDK, the profiler and the devices, without importing the SDK.

The agent process never imports `neuronxcc` (the PyPI packages named neuronx-cc, nki and
torch-neuronx are placeholders; the real ones come from AWS's repository): it only looks
for it on the path. The SDK is imported inside the sandboxed child that runs the kernel.
"""

from __future__ import annotations

import glob
import importlib.machinery
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

NEURON_PIP_INDEX = "https://pip.repos.neuron.amazonaws.com"
NEURON_PROFILE_DEFAULT = "/opt/aws/neuron/bin/neuron-profile"
DEVICE_GLOB = "/dev/neuron*"


class NeuronSDKMissing(RuntimeError):
    """The AWS Neuron SDK (neuronx-cc with `neuronxcc.nki`) is not installed."""


def install_hint(kind: str = "trn1") -> str:
    return (
        f"The {kind} hardware agent needs the AWS Neuron SDK: the Neuron compiler `neuronx-cc` with its "
        f"NKI package (`neuronxcc.nki`), and for timing the `neuron-profile` tool of aws-neuronx-tools. "
        f"`neuronxcc` is not importable by {sys.executable}.\n"
        "Install it on a Trainium instance (trn1/trn2), e.g. on an AWS Deep Learning AMI Neuron (it ships "
        "a ready venv under /opt/aws_neuronx_venv_*), or into this environment from AWS's package "
        "repository:\n"
        f"    python -m pip install neuronx-cc==2.* --extra-index-url {NEURON_PIP_INDEX}\n"
        "    sudo apt-get install aws-neuronx-tools   # neuron-profile (dnf on Amazon Linux)\n"
        "The packages named neuronx-cc / nki on PyPI are placeholders and do not work. Setup guide: "
        "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/setup/index.html\n"
        "Without a Neuron device, neuronx-cc alone is enough for correctness checks "
        "(nki.simulate_kernel; profiles are `unmeasured`)."
    )


class SdkInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Where the SDK is (`origin` of neuronxcc) and which extra Python paths it needs."""

    origin: str
    python_path: tuple[str, ...] = ()
    version: str = ""


def _version(pkg_dir: Path, python_path: Sequence[str]) -> str:
    try:
        import importlib.metadata as md

        for dist in md.distributions(path=[*python_path, *sys.path]):
            if (dist.metadata["Name"] or "").lower() in ("neuronx-cc", "neuronxcc"):
                return dist.version
    except Exception:  # a broken metadata dir must not hide the SDK
        pass
    init = pkg_dir / "__init__.py"
    try:
        for line in init.read_text(errors="replace").splitlines():
            if line.strip().startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    return "unknown"


def find_sdk(python_path: Sequence[str] = ()) -> SdkInfo | None:
    """Locate the `neuronxcc` package on `python_path` + sys.path (not imported)."""
    paths = [str(Path(p)) for p in python_path]
    spec = importlib.machinery.PathFinder.find_spec("neuronxcc", [*paths, *sys.path])
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg_dir = Path(next(iter(spec.submodule_search_locations)))
    if importlib.machinery.PathFinder.find_spec("nki", [str(pkg_dir)]) is None:
        return None  # a neuronxcc without NKI (or the PyPI placeholder) cannot run kernels
    return SdkInfo(origin=str(pkg_dir), python_path=tuple(paths), version=_version(pkg_dir, paths))


def sdk_available() -> bool:
    """Registry probe: can a Neuron agent run here (compile + simulate at least)?"""
    extra = [p for p in os.environ.get("ACCELOPT_NEURON_SDK_PATH", "").split(os.pathsep) if p]
    return find_sdk(extra) is not None


def find_neuron_profile(explicit: str | None = None) -> str | None:
    """The neuron-profile executable: explicit path, PATH, or the aws-neuronx-tools default."""
    for cand in (explicit, shutil.which("neuron-profile"), NEURON_PROFILE_DEFAULT):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.realpath(cand) if not explicit else cand
    return None


def neuron_devices(pattern: str = DEVICE_GLOB) -> list[str]:
    return sorted(p for p in glob.glob(pattern) if not os.path.isdir(p))


def instance_type() -> str:
    """The EC2 instance type from DMI (e.g. "trn1.32xlarge"), or "" when unknown."""
    try:
        return Path("/sys/devices/virtual/dmi/id/product_name").read_text().strip()
    except OSError:
        return ""


def visible_core() -> str | None:
    """The NeuronCore(s) this process may use: NEURON_RT_VISIBLE_CORES (Ray sets it for an
    actor holding `neuron_cores` resources), else the Ray runtime context's ids, else None."""
    env = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if env:
        return env
    ray = sys.modules.get("ray")  # only when this process already runs inside Ray
    if ray is not None:
        try:
            if ray.is_initialized():
                ids = ray.get_runtime_context().get_accelerator_ids().get("neuron_cores") or []
                if ids:
                    return ",".join(str(i) for i in ids)
        except Exception:
            return None
    return None


__all__ = [
    "DEVICE_GLOB",
    "NEURON_PIP_INDEX",
    "NeuronSDKMissing",
    "SdkInfo",
    "find_neuron_profile",
    "find_sdk",
    "install_hint",
    "instance_type",
    "neuron_devices",
    "sdk_available",
    "visible_core",
]
