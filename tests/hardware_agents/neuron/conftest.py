"""Fixtures for the Neuron tests.

No Trainium device and no Neuron SDK exist on this machine, so the device path runs against
the STAND-IN `neuronxcc` package and `neuron-profile` command in `standin/` (see its
README): the agent, its sandbox, the harness, the timing loop, the summary parsing and the
judging are the real ones; only the SDK underneath is imitated.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The agents of these tests keep no references on disk (hardware_agents/neuron/refstore.py):
# nothing of a test run lands in the user's cache dir; test_neuron_data.py tests the store
# with stores of its own.
os.environ.setdefault("ACCELOPT_NKI_REFERENCE_STORE_BYTES", "0")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # neuron_helpers, neuron_kernels, nkibench_fixture

from neuron_helpers import STANDIN, small_problems  # noqa: E402
from nkibench_fixture import write_nkibench  # noqa: E402

import suites  # noqa: E402
from accelopt.problem import Problem  # noqa: E402


@pytest.fixture(scope="session")
def neuron_profile_exe() -> Iterator[str]:
    """An executable `neuron-profile` wrapping the stand-in, in a directory the sandbox can
    read (pytest's own temp dirs are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="accelopt-standin-bin-"))
    os.chmod(d, 0o755)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    exe = d / "neuron-profile"
    exe.write_text(
        f"#!{python}\n# STAND-IN neuron-profile (tests only)\nimport sys\n"
        f"sys.path.insert(0, {str(STANDIN)!r})\nfrom neuron_profile import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    exe.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    yield str(exe)
    exe.unlink()
    d.rmdir()


@pytest.fixture(scope="session")
def small_suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Problem]:
    """Four NKIBench problems at small shapes, imported through `import_nkibench`."""
    from suites.nkibench import import_nkibench

    root = tmp_path_factory.mktemp("nkibench-small")
    write_nkibench(root / "src", small_problems())
    report = import_nkibench(root / "src", root / "suite", name="nkibench-small")
    return {p.name: p for p in suites.load_suite(report.out)}


@pytest.fixture(scope="session")
def trn1(neuron_profile_exe: str) -> Iterator:
    """A trn1 agent in device mode on the stand-in SDK, pinned to NeuronCore 3."""
    from hardware_agents.neuron import Trn1Agent

    agent = Trn1Agent(
        mode="device",
        sdk_path=[str(STANDIN)],
        neuron_profile=neuron_profile_exe,
        core="3",
        timeout_s=60,
        timing_timeout_s=120,
        round_pause_s=0.0,
        check_instance=False,
    )
    yield agent
    agent.close()
