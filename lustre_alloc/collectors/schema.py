"""The sample message, version 1 (docs/protocol.md is the reference; keep both in step).

Wire format: a two-frame ZeroMQ message ``[topic, payload]``.

* ``topic`` = ``lustre-alloc.v1.<role>.<host>`` (ASCII), so a subscriber can filter by prefix
  and the broker's last-value cache is keyed by server.
* ``payload`` = one encoding byte + body: ``0x00`` msgpack map, ``0x01`` zlib-compressed msgpack
  map (zlib from the standard library; Section III-D "reduce and compress").

The map: ``schema`` (int, 1), ``role`` (``oss``/``mds``), ``host`` (str), ``epoch`` (int: the
publisher's start time in ns, new on each collector start), ``seq`` (int, 1, 2, ... per epoch),
``time`` (float, Unix seconds of the sample, aligned to a multiple of the interval),
``interval_s`` (float), ``server`` ({``values``, ``unavailable``}), ``targets`` ({name: {``kind``,
``index``, ``available``, ``values``, ``jobs``, ``unavailable``}}). Units are in value names.
"""
from __future__ import annotations

import zlib
from typing import Any

import msgpack

from lustre_alloc.common.errors import SchemaError

SCHEMA_VERSION = 1
TOPIC_PREFIX = b"lustre-alloc.v1."
HEARTBEAT_TOPIC = b"lustre-alloc.broker"
ENC_MSGPACK = 0x00
ENC_ZLIB = 0x01
#: Largest accepted decoded payload, bytes (a zlib bomb guard; a 64-OST sample is ~20 KiB).
MAX_PAYLOAD = 16 << 20
ROLES = ("oss", "mds")
TARGET_GONE = "missing: no longer listed"
"""``unavailable["target"]`` of the one report a collector sends for a target it no longer
lists (unmounted, or mounted on a failover partner)."""
_REQUIRED = {"schema": int, "role": str, "host": str, "epoch": int, "seq": int,
             "time": (int, float), "interval_s": (int, float), "server": dict, "targets": dict}


def topic_for(role: str, host: str) -> bytes:
    """Topic frame of a server's samples."""
    return TOPIC_PREFIX + f"{role}.{host}".encode("utf-8")


def make_sample(*, role: str, host: str, epoch: int, seq: int, time: float, interval_s: float,
                body: dict[str, Any]) -> dict[str, Any]:
    """The message map from the collector's ``body`` (``server`` and ``targets``)."""
    return {"schema": SCHEMA_VERSION, "role": role, "host": host, "epoch": epoch, "seq": seq,
            "time": float(time), "interval_s": float(interval_s), "server": body["server"],
            "targets": body["targets"]}


def encode(message: dict[str, Any], compress: bool = False) -> bytes:
    """Payload frame: encoding byte + msgpack (zlib level 6 when ``compress``)."""
    packed = msgpack.packb(message, use_bin_type=True)
    if compress:
        return bytes([ENC_ZLIB]) + zlib.compress(packed, 6)
    return bytes([ENC_MSGPACK]) + packed


def decode(payload: bytes) -> dict[str, Any]:
    """Decode and check a payload frame.

    Raises:
        SchemaError: unknown encoding, corrupt data, another schema version, or a missing or
            mistyped required field.
    """
    if not payload:
        raise SchemaError("empty payload")
    body = payload[1:]
    try:
        if payload[0] == ENC_ZLIB:
            inflater = zlib.decompressobj()
            body = inflater.decompress(body, MAX_PAYLOAD)
            if inflater.unconsumed_tail:
                raise SchemaError(f"payload inflates beyond {MAX_PAYLOAD} bytes")
        elif payload[0] != ENC_MSGPACK:
            raise SchemaError(f"unknown encoding byte 0x{payload[0]:02x}")
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except SchemaError:
        raise
    except (zlib.error, ValueError, TypeError, msgpack.UnpackException) as exc:
        raise SchemaError(f"cannot decode payload: {exc}") from exc
    return validate(message)


def validate(message: Any) -> dict[str, Any]:
    """Check the fields every consumer relies on; returns ``message``.

    Raises:
        SchemaError: see :func:`decode`.
    """
    if not isinstance(message, dict):
        raise SchemaError(f"message is a {type(message).__name__}, not a map")
    for name, kind in _REQUIRED.items():
        if name not in message:
            raise SchemaError(f"missing field {name!r}")
        if not isinstance(message[name], kind) or isinstance(message[name], bool):
            raise SchemaError(f"field {name!r} has type {type(message[name]).__name__}")
    if message["schema"] != SCHEMA_VERSION:
        raise SchemaError(f"schema version {message['schema']} (this code reads {SCHEMA_VERSION})")
    if message["role"] not in ROLES:
        raise SchemaError(f"unknown role {message['role']!r}")
    return message
