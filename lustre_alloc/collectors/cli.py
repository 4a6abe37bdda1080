"""``lustre-alloc-collector``: read this server's Lustre statistics every interval and publish
them to the broker (D' on an OSS, D on the MDS; Section III-A)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import signal
import sys
import threading
import time
from typing import Sequence

import zmq

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.common.config import CollectorConfig, load
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.logs import setup_logging
from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.collectors.sources import make_source
from lustre_alloc.common.cli import command_parser, fail

log = logging.getLogger("lustre_alloc.collectors.cli")

#: Seconds between connecting to the broker and the first sample (see :func:`run`).
CONNECT_GRACE_S = 0.5


def build_parser() -> argparse.ArgumentParser:
    p = command_parser(
        prog="lustre-alloc-collector",
        description="Publish reduced Lustre OSS/MDS statistics (rates, space, brw_stats latency, "
                    "jobs, CPU, memory, LNet) to the lustre-alloc broker.")
    p.add_argument("--config", help="TOML file with a [collector] table")
    p.add_argument("--role", choices=("oss", "mds"))
    p.add_argument("--broker", help="broker frontend endpoint, e.g. tcp://mds1:5555")
    p.add_argument("--root", help="directory holding proc/ and sys/ (default /)")
    p.add_argument("--interval", dest="interval_s", type=float, help="seconds between samples (5)")
    p.add_argument("--host", help="server name to publish (default: hostname)")
    p.add_argument("--source", choices=("auto", "files", "lctl"),
                   help="read files under --root, or run lctl get_param (auto: lctl if installed)")
    p.add_argument("--lctl-command", dest="lctl_command", help="lctl command line (default lctl)")
    p.add_argument("--lnetctl-command", dest="lnetctl_command", help="lnetctl command line")
    p.add_argument("--compress", action="store_const", const=True, help="zlib the payloads")
    p.add_argument("--max-jobs", dest="max_jobs", type=int, help="jobs per target per sample (8)")
    p.add_argument("--curve-secret-key", dest="curve_secret_key", help="this server's .key_secret")
    p.add_argument("--curve-server-key", dest="curve_server_key", help="the broker's public .key")
    p.add_argument("--metrics-port", dest="metrics_port", type=int,
                   help="Prometheus /metrics port (0: off)")
    p.add_argument("--steer-endpoint", dest="steer_endpoint",
                   help="serve the steering agent here, e.g. tcp://*:5561 (default: off)")
    p.add_argument("--steer-journal", dest="steer_journal",
                   help="the steering agent's lease journal (default "
                        "/var/lib/lustre-alloc/steer-journal.json)")
    p.add_argument("--steer-authorized-keys", dest="steer_authorized_keys",
                   help="directory of the public keys allowed to steer (the mapper's)")
    p.add_argument("--log-level", dest="log_level", help="debug, info, warning, error or critical (info)")
    p.add_argument("--count", type=int, default=0, help="stop after N samples (0: run forever)")
    p.add_argument("--dry-run", action="store_true",
                   help="print samples as JSON lines on stdout instead of publishing")
    return p


def next_boundary(now: float, interval_s: float) -> float:
    """The next multiple of ``interval_s`` after ``now`` (Unix seconds): all servers sample at
    the same instants, so the mapper can compare them."""
    return (math.floor(now / interval_s) + 1) * interval_s


def run(config: CollectorConfig, stop: threading.Event, *, count: int = 0,
        dry_run: bool = False) -> int:
    """Sample loop. Returns the number of samples taken."""
    source = make_source(config.source, config.role, config.root, config.lctl_command,
                         config.lnetctl_command)
    collector = Collector(config.role, source, max_jobs=config.max_jobs)
    publisher = None if dry_run else Publisher(config.broker, config.role, config.host,
                                               compress=config.compress, curve=config.curve())
    metrics = None
    if config.metrics_port and not dry_run:
        from lustre_alloc.collectors.metrics import CollectorMetrics
        from lustre_alloc.common.metrics import serve
        metrics = CollectorMetrics()
        serve(metrics.registry, config.metrics_port, config.metrics_addr)
    agent = start_agent(config, source) if config.steer_endpoint and not dry_run else None
    settings = dataclasses.asdict(config)
    log.info("collector started", extra={"event": "collector_start", "source": source.description,
                                          "config": settings})
    taken = 0
    # PUB drops what it sends before the broker's subscription reaches it: the first sample
    # waits for a boundary at least CONNECT_GRACE_S after connecting.
    earliest = time.time() + (0.0 if dry_run else CONNECT_GRACE_S)
    try:
        while not stop.is_set() and (count <= 0 or taken < count):
            at = next_boundary(max(time.time(), earliest), config.interval_s)
            if stop.wait(max(0.0, at - time.time())):
                break
            started = time.monotonic()
            body = collector.collect()
            taken += 1
            if metrics is not None:
                metrics.sample(body, time.monotonic() - started, at)
            if publisher is None:
                from lustre_alloc.collectors.schema import make_sample
                sample = make_sample(role=config.role, host=config.host, epoch=0, seq=taken,
                                     time=at, interval_s=config.interval_s, body=body)
                sys.stdout.write(json.dumps(sample, separators=(",", ":")) + "\n")
                sys.stdout.flush()
            else:
                seq = publisher.publish(at, config.interval_s, body)
                rejected = publisher.poll_auth()
                if metrics is not None and rejected:
                    metrics.broker_rejections.inc(rejected)
                log.debug("sample published", extra={"event": "sample", "seq": seq, "time": at,
                                                      "collect_ms": 1000 * (time.monotonic() - started),
                                                      "targets": len(body["targets"])})
    finally:
        if agent is not None:
            agent.stop()            # restores every lease it holds
        if publisher is not None:
            publisher.close()
        log.info("collector stopped", extra={"event": "collector_stop", "samples": taken})
    return taken


def start_agent(config: CollectorConfig, source):
    """The steering agent (:mod:`lustre_alloc.collectors.steer_agent`) on ``config.steer_endpoint``,
    acting through the files under the root (``source = files``) or ``lctl set_param``."""
    from lustre_alloc.collectors.lustre_params import FileParams, LctlParams
    from lustre_alloc.collectors.sources import FileSource
    from lustre_alloc.collectors.steer_agent import SteerAgent, settle_selftest_journal
    from lustre_alloc.collectors.steer_socket import AgentServer
    params = FileParams(config.root) if isinstance(source, FileSource) \
        else LctlParams(config.lctl_command)
    if config.role == "oss":
        def targets():
            return source.targets("ost")
    else:
        def targets():
            return list(source.read_family("osp", "max_create_count"))
    settle_selftest_journal(config.role, targets, params, config.steer_journal)
    agent = SteerAgent(config.role, targets, params, config.steer_max_lease_s,
                       journal=config.steer_journal)
    return AgentServer(agent, config.steer_endpoint, config.steer_curve()).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k not in ("config", "count", "dry_run")}
    try:
        config = load(CollectorConfig, args.config, "collector", overrides)
    except ConfigError as exc:
        return fail("lustre-alloc-collector", exc, 2)
    setup_logging(config.log_level)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        run(config, stop, count=args.count, dry_run=args.dry_run)
    except ConfigError as exc:
        return fail("lustre-alloc-collector", exc, 2)
    except (zmq.ZMQError, OSError) as exc:
        return fail("lustre-alloc-collector", exc, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
