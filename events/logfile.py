"""The exported-log file format: one file per run, events as the exact bytes on the stream,
each record sealed into a hash chain.

Layout (format 2): the magic line `ACCELOPT-LOG 2\\n`, then records, each

    u32 length (big-endian) | payload (msgpack) | 16-byte tag

where tag_i = BLAKE2b-128(tag_{i-1} || length || payload) and tag_0 = BLAKE2b-128(magic).
The first payload is the header {run_id, exported_at, format}; each further one is
[subject, event bytes]; the last is the end mark ["$end", count]. A changed, inserted,
removed or reordered record breaks the chain from there on, a cut-off file lacks its end
mark: either is a `LogIntegrityError` naming the byte offset and the record, and a reader
asked for the valid prefix (`valid_prefix=True`) stops there instead, with that error kept
as `LogReader.damage` for the caller to warn about. The chain is a checksum, not a
signature: it catches damage and careless edits, not someone who recomputes it.

Format 1 (`ACCELOPT-LOG 1\\n`, length-prefixed records without tags or end mark) is still
read; it has no integrity check (`LogReader.checked` is False).

Streaming-friendly (no need to hold a run in memory to write or read it).
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

MAGIC = b"ACCELOPT-LOG 2\n"
MAGIC_V1 = b"ACCELOPT-LOG 1\n"
END_SUBJECT = "$end"
_LEN = struct.Struct(">I")
_TAG = 16
MAX_RECORD_BYTES = 256 << 20  # a length beyond this is damage, not a record


class LogFileError(ValueError):
    pass


class LogIntegrityError(LogFileError):
    """A record that is not what was written: where it starts, and why."""

    def __init__(self, path: Path, offset: int, record: int, reason: str) -> None:
        self.path, self.offset, self.record, self.reason = path, offset, record, reason
        super().__init__(f"{path}: damaged at byte {offset} (record {record}): {reason}")


class LogHeader(msgspec.Struct, kw_only=True):
    run_id: str
    exported_at: float
    format: str = "accelopt-log"


def _tag(prev: bytes, head: bytes, payload: bytes) -> bytes:
    h = hashlib.blake2b(prev, digest_size=_TAG)
    h.update(head)
    h.update(payload)
    return h.digest()


def _first_tag() -> bytes:
    return hashlib.blake2b(MAGIC, digest_size=_TAG).digest()


class LogWriter:
    def __init__(self, path: str | Path, run_id: str) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self.count = 0
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._fh: BinaryIO | None = None
        self._prev = _first_tag()

    def __enter__(self) -> LogWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = fh = open(self._tmp, "wb")
        fh.write(MAGIC)
        self._record(msgspec.msgpack.encode(LogHeader(run_id=self.run_id, exported_at=time.time())))
        return self

    def _record(self, payload: bytes) -> None:
        assert self._fh is not None
        head = _LEN.pack(len(payload))
        self._prev = _tag(self._prev, head, payload)
        self._fh.write(head)
        self._fh.write(payload)
        self._fh.write(self._prev)

    def write(self, subject: str, data: bytes) -> None:
        self._record(msgspec.msgpack.encode([subject, data]))
        self.count += 1

    def __exit__(self, exc_type: object, *rest: object) -> None:
        assert self._fh is not None
        if exc_type is None:
            self._record(msgspec.msgpack.encode([END_SUBJECT, msgspec.msgpack.encode(self.count)]))
        self._fh.close()
        if exc_type is None:
            self._tmp.replace(self.path)  # atomic: a reader never sees half a file
        else:
            self._tmp.unlink(missing_ok=True)


class LogReader:
    """One exported log, read record by record.

    `header` is read (and checked) on opening. `records()` yields (subject, event bytes) in
    log order and raises `LogIntegrityError` at the first damaged record, or, with
    `valid_prefix`, stops there and keeps the error in `damage`. `checked`: the file has
    the integrity chain (format 2); `count`: records yielded so far."""

    def __init__(self, path: str | Path, *, valid_prefix: bool = False) -> None:
        self.path = Path(path)
        self.valid_prefix = valid_prefix
        self.damage: LogIntegrityError | None = None
        self.count = 0
        self._fh = open(self.path, "rb")  # noqa: SIM115 - closed when records() ends
        magic = self._fh.read(len(MAGIC))
        if magic not in (MAGIC, MAGIC_V1):
            self._fh.close()
            raise LogFileError(f"{self.path}: not an AccelOpt log export (bad magic)")
        self.checked = magic == MAGIC
        self._offset = len(magic)
        self._prev = _first_tag()
        self._index = 0
        try:
            payload = self._next()
        except LogIntegrityError:
            self._fh.close()
            raise
        if payload is None:
            self._fh.close()
            raise LogFileError(f"{self.path}: empty log export")
        try:
            self.header = msgspec.msgpack.decode(payload, type=LogHeader)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            self._fh.close()
            raise LogIntegrityError(self.path, len(magic), 0, f"bad header: {e}") from e

    def _damaged(self, offset: int, reason: str) -> LogIntegrityError:
        return LogIntegrityError(self.path, offset, self._index, reason)

    def _next(self) -> bytes | None:
        """The next record's payload, checked; None at the end of the file."""
        start = self._offset
        head = self._fh.read(_LEN.size)
        if not head:
            return None
        if len(head) < _LEN.size:
            raise self._damaged(start, "truncated record header")
        (n,) = _LEN.unpack(head)
        if n > MAX_RECORD_BYTES:
            raise self._damaged(start, f"a record length of {n} bytes (not a record boundary)")
        payload = self._fh.read(n)
        if len(payload) < n:
            raise self._damaged(start, f"truncated record ({len(payload)} of {n} bytes)")
        if self.checked:
            tag = self._fh.read(_TAG)
            if len(tag) < _TAG:
                raise self._damaged(start, "truncated record (its checksum is cut off)")
            expected = _tag(self._prev, head, payload)
            if tag != expected:
                raise self._damaged(start, "checksum mismatch (the record or one before it was changed)")
            self._prev = expected
        self._offset = start + len(head) + n + (_TAG if self.checked else 0)
        self._index += 1
        return payload

    def records(self) -> Iterator[tuple[str, bytes]]:
        try:
            while True:
                start = self._offset
                try:
                    payload = self._next()
                    if payload is None:
                        if self.checked:
                            raise self._damaged(start, "the file ends without its end mark (cut off)")
                        return
                    try:
                        subject, data = msgspec.msgpack.decode(payload, type=tuple[str, bytes])
                    except (msgspec.DecodeError, msgspec.ValidationError) as e:
                        raise self._damaged(start, f"bad record: {e}") from e
                    if subject == END_SUBJECT and self.checked:
                        if self._fh.read(1):
                            raise self._damaged(self._offset, "data after the end mark")
                        return
                except LogIntegrityError as e:
                    if not self.valid_prefix:
                        raise
                    self.damage = e
                    return
                self.count += 1
                yield subject, data
        finally:
            self._fh.close()

    def warning(self) -> str | None:
        """What a tool working on this file should tell its user, if anything."""
        if self.damage is not None:
            return (
                f"{self.damage}; using the {self.count} records before it (the valid prefix): what came "
                "after is lost"
            )
        if not self.checked:
            return f"{self.path}: an export of format 1, without checksums: damage to it would go unnoticed"
        return None


def read_records(
    path: str | Path, *, valid_prefix: bool = False
) -> tuple[LogHeader, Iterator[tuple[str, bytes]]]:
    """The header and an iterator of (subject, event bytes) in log order (see `LogReader`)."""
    reader = LogReader(path, valid_prefix=valid_prefix)
    return reader.header, reader.records()


def read_events(path: str | Path, *, valid_prefix: bool = False) -> list:
    """Decode every event of an exported run (for replay without a server)."""
    from events.codec import EventDecodeError, decode

    reader = LogReader(path, valid_prefix=valid_prefix)
    out = []
    for i, (subject, data) in enumerate(reader.records()):
        try:
            out.append(decode(data, subject, i + 1))
        except EventDecodeError as e:
            raise LogFileError(f"{reader.path}: record {i + 1}: {e}") from e
    return out


def write_events(path: str | Path, events: list) -> Path:
    """Export `events` (one run's, in order) as a log file, the counterpart of `read_events`."""
    from events.codec import encode
    from events.subjects import subject_for

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with LogWriter(path, events[0].run_id) as w:
        for e in events:
            w.write(subject_for(e), encode(e))
    return path
