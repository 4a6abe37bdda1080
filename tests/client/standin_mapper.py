"""A minimal stand-in for the mapper service, speaking docs/protocol.md
"Allocation protocol: shim -> mapper (version 1)", and nothing of version 2: a v2
lease request gets the v1 mapper's answer (EPROTO, "protocol version 2").

The real service (``lustre-alloc-mapper``) serves the normal case in the
tests; this stand-in exists for the misbehaviours the real one cannot be made
to produce: replies that are late, undecodable, wrong or refusals.

Modes (``--mode``):
  normal     round-robin over ``--osts`` OSTs (count -1 = all), like a mapper
  slow       as normal, after sleeping ``--delay-ms``
  slow_first as normal, but the first alloc reply comes ``--delay-ms`` late
  garbage    a body that is not msgpack
  not_map    a msgpack array instead of a map
  no_version a reply map without ``v``
  dup_osts   ok, but the OST list repeats an index
  bad_size   ok, but stripe_size is not a multiple of 64 KiB
  wrong_id   a well-formed reply carrying another request's id (client times out)
  error      ``ok: false, errno: 28`` (ENOSPC), as a mapper with no usable OST
  frames     three frames instead of [b"", body]

Every decoded request (file sizes at close aside) is appended to ``--log`` as one JSON
line.  Prints
``READY <endpoint>`` on stdout once bound.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import msgpack
import zmq


def _layout(req: dict, n_osts: int, state: dict) -> dict:
    count = req.get("stripe_count")
    size = req.get("stripe_size")
    if not isinstance(count, int) or not isinstance(size, int):
        return {"ok": False, "errno": 22, "error": "stripe_count/stripe_size missing"}
    if count == -1:
        count = n_osts
    if count < 1 or count > n_osts:
        return {"ok": False, "errno": 22, "error": f"stripe_count {count} outside 1..{n_osts}"}
    if size <= 0 or size % 65536:
        return {"ok": False, "errno": 22, "error": f"stripe_size {size} not a multiple of 65536"}
    start = state["next"]
    state["next"] = (start + 1) % n_osts
    osts = [(start + i) % n_osts for i in range(count)]
    return {"ok": True, "osts": osts, "stripe_size": size, "policy": "standin_rr", "fallback": ""}


def reply_for(req: dict, mode: str, n_osts: int, state: dict) -> list[bytes]:
    """Frames (after the routing id) answering ``req`` in ``mode``."""
    rid = req.get("id", 0) if isinstance(req.get("id"), int) else 0
    if req.get("v") != 1:       # as the v1 mapper answers a v2 lease request
        return [b"", msgpack.packb({"v": 1, "id": rid, "ok": False, "errno": 71,
                                    "error": f"protocol version {req.get('v')!r} (this "
                                             f"mapper speaks 1)"})]
    if req.get("op") == "ping":
        body = {"v": 1, "id": rid, "ok": True, "op": "pong", "policy": "standin_rr"}
        return [b"", msgpack.packb(body)]
    if mode == "garbage":
        return [b"", b"\xc1 this is not msgpack"]
    if mode == "not_map":
        return [b"", msgpack.packb([1, rid, True])]
    if mode == "frames":
        return [b"", msgpack.packb({"v": 1, "id": rid, "ok": True}), b"extra"]
    if mode == "error":
        return [b"", msgpack.packb({"v": 1, "id": rid, "ok": False, "errno": 28,
                                    "error": "no usable OST"})]
    body = {"v": 1, "id": rid}
    body.update(_layout(req, n_osts, state))
    if mode == "no_version":
        del body["v"]
    elif mode == "wrong_id":
        body["id"] = rid + 1_000_000
    elif mode == "dup_osts" and body.get("ok"):
        body["osts"] = [body["osts"][0]] * len(body["osts"])
    elif mode == "bad_size" and body.get("ok"):
        body["stripe_size"] = 1000
    return [b"", msgpack.packb(body)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bind", required=True)
    ap.add_argument("--mode", default="normal")
    ap.add_argument("--osts", type=int, default=8)
    ap.add_argument("--delay-ms", type=float, default=200.0)
    ap.add_argument("--log")
    args = ap.parse_args(argv)

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind(args.bind)
    log = open(args.log, "a", buffering=1) if args.log else None
    state = {"next": 0}
    print(f"READY {args.bind}", flush=True)
    try:
        while True:
            frames = sock.recv_multipart()
            if len(frames) != 3 or frames[1] != b"":
                continue
            try:
                req = msgpack.unpackb(frames[2], raw=False)
            except Exception:  # noqa: BLE001 - a stand-in answers nothing to garbage
                continue
            if not isinstance(req, dict):
                continue
            if req.get("op") == "sizes":
                # file sizes at close: answered at once, not logged (the logs are of the
                # layout requests the tests count)
                sock.send_multipart([frames[0], b"", msgpack.packb(
                    {"v": 2, "id": req.get("id", 0), "ok": True, "op": "sized", "learned": 0})])
                continue
            if log:
                shown = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                         for k, v in req.items()}
                log.write(json.dumps(shown) + "\n")
            if req.get("op") != "ping" and (
                args.mode == "slow" or (args.mode == "slow_first" and not state.get("slowed"))
            ):
                state["slowed"] = True
                time.sleep(args.delay_ms / 1000.0)
            sock.send_multipart([frames[0], *reply_for(req, args.mode, args.osts, state)])
    except KeyboardInterrupt:
        return 0
    finally:
        sock.close()
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
