"""The exported log's hash chain (events/logfile.py, format 2): every changed byte, cut, insertion
or trailing junk is an error naming its byte offset and record; the valid prefix stays
readable with a warning; format 1 files still read, flagged as unchecked."""

from __future__ import annotations

import struct
from pathlib import Path

import msgspec
import pytest

from events.codec import decode, encode
from events.logfile import (
    MAGIC_V1,
    LogFileError,
    LogIntegrityError,
    LogReader,
    read_events,
    write_events,
)
from events.subjects import subject_for


@pytest.fixture
def log(tmp_path: Path, sample_events) -> tuple[Path, list]:
    events = sample_events("chain")
    return write_events(tmp_path / "run.aolog", events), events


def _record_offsets(path: Path) -> list[int]:
    """Where each record starts (the header is record 0), read with the format's own rules."""
    data = path.read_bytes()
    pos, out = 15, []
    while pos < len(data):
        out.append(pos)
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        pos += 4 + n + 16
    return out


def test_an_intact_log_reads_back_with_its_end_mark(log) -> None:
    path, events = log
    reader = LogReader(path)
    got = [decode(d, s) for s, d in reader.records()]
    assert got == events and reader.checked and reader.damage is None and reader.warning() is None
    assert reader.header.run_id == "chain"


@pytest.mark.parametrize("record", [1, 3, -2])
def test_one_changed_byte_is_named_by_offset(log, record: int) -> None:
    path, events = log
    starts = _record_offsets(path)
    at = starts[record] + 4 + 8  # inside the record's payload
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(LogIntegrityError) as info:
        read_events(path)
    k = record % len(starts)
    assert info.value.offset == starts[k] and info.value.record == k
    assert f"damaged at byte {starts[k]} (record {k})" in str(info.value)
    reader = LogReader(path, valid_prefix=True)  # the valid prefix, with a warning
    assert [decode(d, s) for s, d in reader.records()] == events[: k - 1]
    assert reader.damage is not None and "valid prefix" in (reader.warning() or "")


def test_garbage_in_the_middle_cut_off_and_trailing_data(log) -> None:
    path, events = log
    starts = _record_offsets(path)
    raw = path.read_bytes()
    mid = starts[len(starts) // 2]
    path.write_bytes(raw[: mid + 10] + bytes(range(64)) + raw[mid + 74 :])  # 64 corrupted bytes
    with pytest.raises(LogIntegrityError, match=f"damaged at byte {mid} "):
        read_events(path)
    path.write_bytes(raw[: starts[-1]])  # cut before the end mark, at a record boundary
    with pytest.raises(LogIntegrityError, match="without its end mark"):
        read_events(path)
    assert read_events(path, valid_prefix=True) == events  # every event is there, only the mark is not
    path.write_bytes(raw + b"junk")
    with pytest.raises(LogIntegrityError, match="after the end mark"):
        read_events(path)


def test_removed_or_swapped_records_break_the_chain(log) -> None:
    path, _ = log
    starts = _record_offsets(path)
    raw = path.read_bytes()
    a, b, c = starts[2], starts[3], starts[4]
    path.write_bytes(raw[:a] + raw[b:])  # record 2 removed
    with pytest.raises(LogIntegrityError, match=f"byte {a} "):
        read_events(path)
    path.write_bytes(raw[:a] + raw[b:c] + raw[a:b] + raw[c:])  # records 2 and 3 swapped
    with pytest.raises(LogIntegrityError, match=f"byte {a} "):
        read_events(path)


def test_empty_garbage_and_headerless_files_are_clear_errors(tmp_path: Path) -> None:
    for content, words in [
        (b"", "bad magic"),
        (b"hello world", "bad magic"),
        (b"ACCELOPT-LOG 2\n", "empty log export"),
        (b"ACCELOPT-LOG 2\n\x00\x00", "truncated"),
    ]:
        p = tmp_path / "f.aolog"
        p.write_bytes(content)
        with pytest.raises(LogFileError, match=words):
            read_events(p)


def test_format_1_still_reads_and_says_it_is_unchecked(tmp_path: Path, sample_events) -> None:
    events = sample_events("v1")
    p = tmp_path / "old.aolog"
    with open(p, "wb") as f:
        f.write(MAGIC_V1)
        for payload in [
            msgspec.msgpack.encode({"run_id": "v1", "exported_at": 0.0}),
            *(msgspec.msgpack.encode([subject_for(e), encode(e)]) for e in events),
        ]:
            f.write(struct.pack(">I", len(payload)) + payload)
    reader = LogReader(p)
    assert [decode(d, s) for s, d in reader.records()] == events
    assert not reader.checked and "without checksums" in (reader.warning() or "")
