"""``lustre-alloc-mapper``: the global mapper on the MDS (Paul et al. 2017, Section III).

    lustre-alloc-mapper --config /etc/lustre-alloc/mapper.toml
    lustre-alloc-mapper --bind tcp://127.0.0.1:5558 --static-cluster 4x2 --policy random

``--static-cluster OSSxOSTS`` serves a fixed emulated cluster that never goes stale, with no
broker: for tests and for developing clients (the C shim) against a live mapper.
"""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Sequence

from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.logs import setup_logging
from lustre_alloc.mapper.service.server import MapperService, ServiceError
from lustre_alloc.mapper.service.config import MapperConfig, load_config
from lustre_alloc.common.cli import command_parser, fail


def build_parser() -> argparse.ArgumentParser:
    d = MapperConfig()      # the defaults the help names (one source: no stale numbers)
    p = command_parser(
        prog="lustre-alloc-mapper",
        description="Serve OST allocation requests (docs/protocol.md) from collector statistics, "
                    "the request predictor and min-cost flow, falling back to Lustre's allocator.")
    p.add_argument("--config", help="TOML file with a [mapper] table and optional [policy.<name>] tables")
    p.add_argument("--bind", help=f"request endpoint (ROUTER), default {d.bind}")
    p.add_argument("--static-cluster", dest="static_cluster", metavar="OSSxOSTS",
                   help="serve a static emulated cluster, e.g. 4x2 (no broker, never stale)")
    p.add_argument("--policy", help=f"primary placement policy (default {d.policy})")
    p.add_argument("--fallback", help=f"fallback policy (default {d.fallback})")
    p.add_argument("--seed", type=int, help="policies' random seed")
    p.add_argument("--state-file", dest="state_file", help="learned state file")
    p.add_argument("--save-interval", dest="save_interval_s", type=float,
                   help=f"seconds between learned-state saves ({d.save_interval_s:g})")
    p.add_argument("--metrics-port", dest="metrics_port", type=int,
                   help="Prometheus port (0: off)")
    p.add_argument("--broker-backend", dest="broker_backend", help="broker XPUB endpoint")
    p.add_argument("--broker-snapshot", dest="broker_snapshot", help="broker snapshot endpoint")
    p.add_argument("--embed-broker", dest="embed_broker", action="store_const", const=True,
                   help="run the broker inside the mapper")
    p.add_argument("--mds-cpu-limit", dest="mds_cpu_limit_percent", type=float,
                   help=f"fall back at or above this MDS CPU %% ({d.mds_cpu_limit_percent:g})")
    p.add_argument("--stale-after", dest="stale_after_s", type=float,
                   help="seconds without a sample before a server is stale (0: 2 x interval)")
    p.add_argument("--round-budget", dest="round_budget_s", type=float,
                   help=f"fall back while a round takes longer than this, s ({d.round_budget_s:g})")
    p.add_argument("--batch-window", dest="batch_window_s", type=float,
                   help=f"wait this long for more requests to solve together, s ({d.batch_window_s:g})")
    p.add_argument("--no-plan-ahead", dest="plan_ahead", action="store_const", const=False,
                   help="solve every request in a round instead of answering from lists "
                        "the background planner made ahead")
    p.add_argument("--no-plan-process", dest="plan_process", action="store_const", const=False,
                   help="solve the planner's flows in its thread instead of a child process")
    p.add_argument("--fsname", dest="fsnames", action="append", metavar="FSNAME",
                   help="a file system to serve (repeat for several; default: the first sampled)")
    p.add_argument("--insecure", dest="insecure", action="store_const", const=True,
                   help="serve without CURVE, even on an address other hosts reach or when the "
                        "configuration requires CURVE (demos only: any host can then steer "
                        "allocations)")
    p.add_argument("--log-level", dest="log_level",
                   help=f"debug, info, warning, error or critical ({d.log_level})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k != "config"}
    if overrides.get("insecure"):
        overrides["require_curve"] = False
    try:
        config = load_config(args.config, overrides)
        for keys in (config.curve(), config.serve_curve()):
            if keys is not None:
                keys.check()        # missing or unreadable keys: before anything starts
        config.check_exposure()
    except ConfigError as exc:
        return fail("lustre-alloc-mapper", exc, 2)
    setup_logging(config.log_level)
    try:
        service = MapperService(config)
    except (ServiceError, ConfigError) as exc:
        return fail("lustre-alloc-mapper", exc, 2)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: service.stop_event.set())
    from lustre_alloc.mapper.service.reload import Reloader
    service.reloader = Reloader(service, args.config, overrides)
    signal.signal(signal.SIGHUP, lambda *_: service.reloader.request())   # systemctl reload
    try:
        service.run()
    except ConfigError as exc:       # missing or unreadable keys: the configuration is wrong
        return fail("lustre-alloc-mapper", exc, 2)
    except ServiceError as exc:      # the endpoint is in use, the broker unreachable...
        return fail("lustre-alloc-mapper", exc, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
