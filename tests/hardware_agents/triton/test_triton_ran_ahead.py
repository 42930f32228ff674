"""A harness child continued while the agent held it stopped (by a helper process of the
kernel) reads a round's inputs before the agent has written them. The race itself is the
corpus file `helper_continues_stopped_child`; here both halves are checked without it: the
harness names the missing inputs (`RanAheadOfItsInputs`), and the judge turns that, and only
that, into `incorrect` (a freeze breach the agent saw itself keeps priority)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hardware_agents.sandbox import FreezeBreach, SandboxOutcome
from hardware_agents.triton.harness import RanAheadOfItsInputs, RoundData, load_handed_over
from hardware_agents.triton.judge import ran_ahead
from hardware_agents.triton.records import RAN_AHEAD, checks_file, round_file


def test_the_harness_names_a_round_whose_inputs_are_not_there(tmp_path: Path) -> None:
    missing = tmp_path / round_file(0)
    with pytest.raises(RanAheadOfItsInputs, match=r"round-0\.pt is not there") as err:
        RoundData.load(missing, torch.device("cpu"))
    assert type(err.value).__name__ == RAN_AHEAD  # the error type the child reports


def test_the_harness_names_a_round_whose_checks_are_not_there(tmp_path: Path) -> None:
    """The other file handed over between calls: what to send back of round k's outputs
    (a child run ahead at the end of a round looked for it and died of FileNotFoundError,
    `runtime_error`, where the verdict is `incorrect`)."""
    with pytest.raises(RanAheadOfItsInputs, match=r"checks-2\.pt is not there"):
        load_handed_over(tmp_path / checks_file(2))
    (tmp_path / checks_file(2)).parent.mkdir(parents=True, exist_ok=True)
    torch.save({"full": torch.tensor([1])}, tmp_path / checks_file(2))
    assert load_handed_over(tmp_path / checks_file(2))["full"].tolist() == [1]


def test_the_judge_calls_it_running_while_stopped() -> None:
    out = SandboxOutcome(status="error", error_type=RAN_AHEAD, error="Traceback ...\nround-3.pt is not there")
    why = ran_ahead(out)
    assert why is not None and "ran while it was stopped" in why and "round-3.pt" in why
    # any other end of the child is judged as before
    assert ran_ahead(SandboxOutcome(status="error", error_type="FileNotFoundError", error="x")) is None
    assert ran_ahead(SandboxOutcome(status="ok")) is None
    # the agent's own evidence of the breach comes first
    breach = FreezeBreach(reason="continued", pid=1, detail="continued by another")
    assert (
        ran_ahead(SandboxOutcome(status="error", error_type=RAN_AHEAD, error="x", freeze_breach=breach))
        is None
    )
