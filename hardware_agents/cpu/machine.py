"""Facts about this machine that calibration and the harness depend on."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import msgspec

DEFAULT_CC = "gcc"


class MachineInfo(msgspec.Struct, frozen=True, kw_only=True):
    cpu_model: str
    cores: int
    l2_bytes: int
    l3_bytes: int
    compiler: str  # e.g. "gcc 12.2.0"
    kernel: str

    def key(self) -> str:
        """Identity of a calibration: CPU model, usable cores, compiler."""
        raw = f"{self.cpu_model}|{self.cores}|{self.compiler}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cache_sizes() -> tuple[int, int]:
    """(L2 per core, L3 total) in bytes from sysfs; generous defaults when unknown."""
    l2, l3 = 1 << 20, 32 << 20
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = int((idx / "level").read_text())
            size = (idx / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not m:
            continue
        n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
        if level == 2:
            l2 = n
        elif level == 3:
            l3 = n
    return l2, l3


@functools.cache
def compiler_version(cc: str = DEFAULT_CC) -> str:
    path = shutil.which(cc)
    if path is None:
        return f"{cc} (not found)"
    try:
        out = subprocess.run(
            [path, "-dumpfullversion"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = "unknown"
    return f"{Path(cc).name} {out}"


@functools.cache
def machine_info(cc: str = DEFAULT_CC) -> MachineInfo:
    l2, l3 = _cache_sizes()
    return MachineInfo(
        cpu_model=_cpu_model(),
        cores=usable_cores(),
        l2_bytes=l2,
        l3_bytes=l3,
        compiler=compiler_version(cc),
        kernel=platform.release(),
    )


def cache_dir() -> Path:
    """$ACCELOPT_CACHE_DIR, default ~/.cache/accelopt."""
    env = os.environ.get("ACCELOPT_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "accelopt"
