"""`returned_values`: the one rule by which the entry point's and the reference's returns become
one value per output (no torch: the rule is on plain values)."""

from __future__ import annotations

import pytest

from hardware_agents.triton.returned import returned_values


class Mismatch(Exception):
    pass


def test_one_value_tuple_list_and_dict_in_the_definitions_order() -> None:
    assert returned_values(7, ["out"], "the entry point") == [7]
    assert returned_values((1, 2), ["a", "b"], "the entry point") == [1, 2]
    assert returned_values([1, 2], ["a", "b"], "the entry point") == [1, 2]
    # a dict is read by name, in the definition's order; keys that are not outputs are ignored
    assert returned_values({"b": 2, "extra": 9, "a": 1}, ["a", "b"], "the entry point") == [1, 2]


def test_a_dict_without_an_output_names_it_and_its_keys() -> None:
    with pytest.raises(Mismatch) as e:
        returned_values({"output": 1, "rms": 2}, ["output", "inv_rms"], "rmsnorm: the reference", Mismatch)
    assert str(e.value) == (
        "rmsnorm: the reference returned a dict without output(s) inv_rms (its keys: output, rms)"
    )


def test_a_count_unlike_the_definitions_is_refused() -> None:
    with pytest.raises(ValueError) as e:
        returned_values((1, 2, 3), ["a", "b"], "the entry point")
    assert str(e.value) == "the entry point returned 3 value(s); the definition has 2 output(s): a, b"
    with pytest.raises(ValueError):
        returned_values(1, ["a", "b"], "the entry point")  # one value for two outputs
