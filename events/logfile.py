"""The exported-log file format: one file per run, events as the exact bytes on the stream.

Layout: the magic line `ACCELOPT-LOG 1\n`, then length-prefixed msgpack records. The first
record is the header {run_id, exported_at, count?}; each further record is
[subject, event bytes]. Streaming-friendly (no need to hold a run in memory to write it).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

MAGIC = b"ACCELOPT-LOG 1\n"
_LEN = struct.Struct(">I")


class LogFileError(ValueError):
    pass


class LogHeader(msgspec.Struct, kw_only=True):
    run_id: str
    exported_at: float
    format: str = "accelopt-log"


class LogWriter:
    def __init__(self, path: str | Path, run_id: str) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self.count = 0
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._fh: BinaryIO | None = None

    def __enter__(self) -> LogWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = fh = open(self._tmp, "wb")
        fh.write(MAGIC)
        self._record(msgspec.msgpack.encode(LogHeader(run_id=self.run_id, exported_at=time.time())))
        return self

    def _record(self, payload: bytes) -> None:
        assert self._fh is not None
        self._fh.write(_LEN.pack(len(payload)))
        self._fh.write(payload)

    def write(self, subject: str, data: bytes) -> None:
        self._record(msgspec.msgpack.encode([subject, data]))
        self.count += 1

    def __exit__(self, exc_type: object, *rest: object) -> None:
        assert self._fh is not None
        self._fh.close()
        if exc_type is None:
            self._tmp.replace(self.path)  # atomic: a reader never sees half a file
        else:
            self._tmp.unlink(missing_ok=True)


def _iter_payloads(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        if fh.read(len(MAGIC)) != MAGIC:
            raise LogFileError(f"{path}: not an AccelOpt log export (bad magic)")
        while True:
            head = fh.read(_LEN.size)
            if not head:
                return
            if len(head) < _LEN.size:
                raise LogFileError(f"{path}: truncated record header")
            (n,) = _LEN.unpack(head)
            payload = fh.read(n)
            if len(payload) < n:
                raise LogFileError(f"{path}: truncated record")
            yield payload


def read_records(path: str | Path) -> tuple[LogHeader, Iterator[tuple[str, bytes]]]:
    """The header and an iterator of (subject, event bytes) in log order."""
    p = Path(path)
    payloads = _iter_payloads(p)
    try:
        header = msgspec.msgpack.decode(next(payloads), type=LogHeader)
    except StopIteration:
        raise LogFileError(f"{p}: empty log export") from None
    except msgspec.ValidationError as e:
        raise LogFileError(f"{p}: bad header: {e}") from e

    def records() -> Iterator[tuple[str, bytes]]:
        for payload in payloads:
            try:
                subject, data = msgspec.msgpack.decode(payload, type=tuple[str, bytes])
            except msgspec.ValidationError as e:
                raise LogFileError(f"{p}: bad record: {e}") from e
            yield subject, data

    return header, records()


def read_events(path: str | Path) -> list:
    """Decode every event of an exported run (for replay without a server)."""
    from events.codec import decode

    _, records = read_records(path)
    return [decode(data, subject, i + 1) for i, (subject, data) in enumerate(records)]


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
