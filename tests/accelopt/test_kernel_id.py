"""The kernel id rule (accelopt/kernel_id.py): a hash of the problem, the language and the
exact bytes of the source, and the one place a run applies it (`RunStarted.new_kernel_id`)."""

from __future__ import annotations

import msgspec

from accelopt import catalog as ev
from accelopt.kernel_id import kernel_id
from events.codec import decode, encode
from replay.synthetic import _target

SOURCE = "void kernel(const float* x, float* y) { y[0] = x[0]; }\n"


def test_the_id_is_sha256_of_the_fields_cut_to_32_hex():
    # pinned: the rule is part of every log and dataset; changing it renames every kernel
    assert kernel_id("silu", "c", "void kernel(void) {}\n") == "4cbafada46c82677ee72b135332c968b"
    kid = kernel_id("silu", "c", SOURCE)
    assert len(kid) == 32 and int(kid, 16) >= 0 and kid == kid.lower()
    assert kernel_id("silu", "c", SOURCE) == kid  # the same content, the same id, always


def test_the_same_text_in_c_and_in_nki_is_two_kernels():
    text = "def kernel(x):\n    return x\n"
    assert kernel_id("silu", "c", text) != kernel_id("silu", "nki", text)
    assert kernel_id("silu", "c", SOURCE) != kernel_id("gelu", "c", SOURCE)  # another problem


def test_one_byte_is_another_kernel_and_fields_do_not_run_together():
    variants = {
        SOURCE,
        SOURCE.replace("\n", "\r\n"),  # line endings: no normalisation
        SOURCE + " ",
        SOURCE.replace("y[0] = x[0];", "y[0]  = x[0];"),
        SOURCE.replace("x[0]", "x[0] /* same */", 1),
    }
    assert len({kernel_id("silu", "c", s) for s in variants}) == len(variants) == 5
    # each field is length-prefixed: moving bytes from one field to the next changes the id
    assert kernel_id("ab", "c", "x") != kernel_id("a", "bc", "x")
    assert kernel_id("silu", "c", "") != kernel_id("silu", "", "c")


def _started(run_id: str, rule: ev.KernelIds) -> ev.RunStarted:
    return ev.RunStarted(
        **ev.envelope(ev.RunStarted, run_id, ts=0.0),
        config={},
        seed=0,
        targets=[_target("op00")],
        kernel_ids=rule,
    )


def test_a_run_names_a_kernel_by_its_content_whoever_proposed_it():
    a, b = _started("run-a", "content"), _started("run-b", "content")
    kid = kernel_id("op00", "c", SOURCE)
    assert a.new_kernel_id("op00", "c", SOURCE, "request-1") == kid
    assert b.new_kernel_id("op00", "c", SOURCE, "request-2") == kid  # another run, another request
    assert a.new_kernel_id("op00", "c", SOURCE + "\n", "request-1") != kid


def test_a_run_recorded_before_content_ids_keeps_naming_kernels_by_request():
    new = _started("run-a", "content")
    raw = msgspec.msgpack.decode(encode(new))
    del raw["kernel_ids"]  # a RunStarted written before the field existed
    old = decode(msgspec.msgpack.encode(raw))
    assert isinstance(old, ev.RunStarted) and old.kernel_ids == "request"
    assert old.new_kernel_id("op00", "c", SOURCE, "request-1") == ev.derive_event_id(
        "run-a", "Kernel", "request-1"
    )
    assert decode(encode(new)) == new  # a new one says so, and reads back the same
