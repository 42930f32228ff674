"""msgpack encoding of events, and decoding with errors that say where a bad message sits;
the checksum every message on the stream carries (`Accelopt-Sum`).

A message of an older version of its event type is read through the type's upcasters
(`accelopt/upcasters.py`) before it is decoded; one of the current version (every message a
run of this AccelOpt writes) is decoded as it is."""

from __future__ import annotations

import hashlib

import msgspec

from accelopt.catalog import EVENTS_BY_NAME, VERSION_OF, AnyEvent, Event
from accelopt.upcasters import UpcastError, upcast


class EventDecodeError(ValueError):
    """A message on the log that is not a known event of a supported schema version."""

    def __init__(self, subject: str, sequence: int | None, reason: str) -> None:
        self.subject = subject
        self.sequence = sequence
        where = f"subject {subject!r}" + (f", stream sequence {sequence}" if sequence is not None else "")
        super().__init__(f"cannot decode event at {where}: {reason}")


class StreamIntegrityError(ValueError):
    """A message on the stream whose bytes do not match the checksum it was published with."""

    def __init__(self, subject: str, sequence: int | None) -> None:
        self.subject, self.sequence = subject, sequence
        super().__init__(
            f"damaged message on the event stream at sequence {sequence} ({subject}): its bytes do "
            "not match the checksum it was published with"
        )


SUM_HEADER = "Accelopt-Sum"


def checksum(data: bytes) -> str:
    """The `Accelopt-Sum` header of a message with these bytes: BLAKE2b-128, hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(data: bytes, subject: str = "?", sequence: int | None = None) -> Event:
    try:
        event = _decoder.decode(data)
    except msgspec.ValidationError as e:
        # perhaps an older version's shape: read it as that version, if it is one
        return _decode_older(data, subject, sequence, refused=e)
    except msgspec.DecodeError as e:
        raise EventDecodeError(subject, sequence, f"not msgpack: {e}") from e
    if event.schema_version != VERSION_OF[type(event)]:
        return _decode_older(data, subject, sequence, refused=None)
    return event


def _decode_older(
    data: bytes, subject: str, sequence: int | None, refused: msgspec.ValidationError | None
) -> Event:
    """The message read through its type's upcasters; `refused`: why the current types did
    not decode it, the error where it is of the current version."""
    raw = msgspec.msgpack.decode(data)
    kind = EVENTS_BY_NAME.get(str(raw.get("type"))) if isinstance(raw, dict) else None
    if kind is None or (refused is not None and raw.get("schema_version", 1) == VERSION_OF[kind]):
        reason = str(refused)
        if "Invalid value" in reason and "$.type" in reason:
            reason = f"unknown event type ({reason})"
        raise EventDecodeError(subject, sequence, reason) from refused
    try:
        return _decoder.decode(_encoder.encode(upcast(raw, VERSION_OF[kind])))
    except UpcastError as e:
        raise EventDecodeError(subject, sequence, str(e)) from e
    except msgspec.ValidationError as e:
        version = raw.get("schema_version", 1)
        raise EventDecodeError(subject, sequence, f"{e} (read as {kind.__name__} version {version})") from e
