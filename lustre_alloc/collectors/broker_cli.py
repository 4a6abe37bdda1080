"""``lustre-alloc-broker``: the standalone broker between collectors and the mapper."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import threading
from typing import Sequence

import zmq

from lustre_alloc.collectors.broker import Broker
from lustre_alloc.common.config import BrokerConfig, load
from lustre_alloc.common.curve import generate_keys
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.logs import setup_logging
from lustre_alloc.common.cli import command_parser, fail

log = logging.getLogger("lustre_alloc.collectors.broker_cli")


def build_parser() -> argparse.ArgumentParser:
    p = command_parser(
        prog="lustre-alloc-broker",
        description="Forward collector samples (XSUB frontend) to subscribers (XPUB backend) with "
                    "a last-value cache (ROUTER snapshot endpoint).")
    p.add_argument("--config", help="TOML file with a [broker] table")
    p.add_argument("--frontend", help="bind endpoint for collectors (tcp://*:5555)")
    p.add_argument("--backend", help="bind endpoint for subscribers (tcp://*:5556)")
    p.add_argument("--snapshot", help="bind endpoint for the last-value cache (tcp://*:5557)")
    p.add_argument("--heartbeat", dest="heartbeat_s", type=float, help="seconds (1)")
    p.add_argument("--curve-secret-key", dest="curve_secret_key", help="broker .key_secret file")
    p.add_argument("--curve-authorized-keys", dest="curve_authorized_keys",
                   help="directory of authorised clients' public .key files")
    p.add_argument("--stats-interval", dest="stats_interval_s", type=float,
                   help="seconds between counter log lines (60)")
    p.add_argument("--insecure", dest="require_curve", action="store_const", const=False,
                   help="accept unkeyed publishers even if the configuration requires CURVE "
                        "(demos only)")
    p.add_argument("--metrics-port", dest="metrics_port", type=int,
                   help="Prometheus /metrics port (0: off)")
    p.add_argument("--log-level", dest="log_level", help="debug, info, warning, error or critical (info)")
    p.add_argument("--keygen", metavar="NAME",
                   help="write NAME.key and NAME.key_secret into --keys-dir and exit")
    p.add_argument("--keys-dir", default=".", help="directory for --keygen")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.keygen:
        try:
            public, secret = generate_keys(args.keys_dir, args.keygen)
        except OSError as exc:
            return fail("lustre-alloc-broker", f"--keygen: {exc}", 2)
        print(f"{public}\n{secret}")
        return 0
    overrides = {k: v for k, v in vars(args).items() if k not in ("config", "keygen", "keys_dir")}
    try:
        config = load(BrokerConfig, args.config, "broker", overrides)
    except ConfigError as exc:
        return fail("lustre-alloc-broker", exc, 2)
    try:
        curve = config.curve()
        if curve is not None:
            curve.check()       # missing or unreadable keys: a configuration error, exit 2
    except ConfigError as exc:
        return fail("lustre-alloc-broker", exc, 2)
    setup_logging(config.log_level)
    log.info("broker configuration", extra={"event": "config", "config": dataclasses.asdict(config)})
    broker = Broker(config.frontend, config.backend, config.snapshot, curve=config.curve(),
                    heartbeat_s=config.heartbeat_s, backend_hwm=config.backend_hwm)
    try:
        broker.start()
    except (zmq.ZMQError, ConfigError, TimeoutError) as exc:
        log.error("broker failed to start", extra={"event": "start_failed", "error": str(exc)})
        return 1
    if config.metrics_port:
        from lustre_alloc.collectors.metrics import broker_registry
        from lustre_alloc.common.metrics import serve
        try:
            serve(broker_registry(broker), config.metrics_port, config.metrics_addr)
        except OSError as exc:
            broker.stop()
            return fail("lustre-alloc-broker", f"cannot serve /metrics on port "
                        f"{config.metrics_port}: {exc}", 1)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(config.stats_interval_s):
        log.info("broker counters", extra={"event": "stats", **dataclasses.asdict(broker.stats)})
    broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
