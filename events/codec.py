"""msgpack encoding of events, and decoding with errors that say where a bad message sits;
the checksum every message on the stream carries (`Accelopt-Sum`)."""

from __future__ import annotations

import hashlib

import msgspec

from accelopt.catalog import SCHEMA_VERSION, AnyEvent, Event


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
        reason = str(e)
        if "Invalid value" in reason and "$.type" in reason:
            reason = f"unknown event type ({reason})"
        raise EventDecodeError(subject, sequence, reason) from e
    except msgspec.DecodeError as e:
        raise EventDecodeError(subject, sequence, f"not msgpack: {e}") from e
    if event.schema_version > SCHEMA_VERSION:
        raise EventDecodeError(
            subject,
            sequence,
            f"schema_version {event.schema_version} is newer than this AccelOpt ({SCHEMA_VERSION}); upgrade",
        )
    return event
