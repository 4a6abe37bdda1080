"""``lustre-alloc-rebalance run --config FILE`` (and, through :mod:`mapper.rebalance.cli`,
``plan``): the migration service
(:mod:`mapper.migrate.service`), asking the mapper through its admin socket.

Exit status: 0 after SIGTERM/SIGINT (running moves are stopped; their files keep their old
layout and are retried at the next start); 2 for a bad configuration or journal (one line).
"""
from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from common.cli import EXIT_USAGE, fail
from common.logs import setup_logging
from mapper.migrate.config import MigrateConfig, MigrateConfigError, load
from mapper.migrate.journal import JournalError
from mapper.migrate.service import MigrationService, ViewError

log = logging.getLogger("mapper.migrate.cli")


class MapperView:
    """The mapper's ``migration_view`` over its admin socket
    (:mod:`mapper.service.migration_view`)."""

    def __init__(self, cfg: MigrateConfig, timeout_s: float = 15.0):
        self.fsname, self.timeout_s = cfg.fsname, timeout_s
        self.socket = cfg.mapper_socket

    def view(self, report: dict[str, Any]) -> dict[str, Any]:
        from mapper.service.ctl import CtlError, ask, default_socket
        try:
            reply = ask(self.socket or default_socket(),
                        {"op": "migration_view", "fsname": self.fsname, "report": report},
                        self.timeout_s)
        except CtlError as exc:
            raise ViewError(str(exc)) from None
        if not reply.get("ok"):
            raise ViewError(str(reply.get("error", "refused")))
        return reply


def main(argv: list[str] | None = None) -> int:
    """``lustre-alloc-rebalance``: ``plan`` (:mod:`mapper.rebalance.cli`) and ``run``."""
    from mapper.rebalance.cli import main as rebalance_main
    return rebalance_main(argv, {"run": (add_run_parser, cmd_run)})


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="the migration service (evacuation, fill balance)")
    run.add_argument("--config", required=True, help="a TOML file with a [migrate] table")
    run.add_argument("--once", action="store_true", help="one loop, then exit")
    run.add_argument("--log-level", default="info")


def cmd_run(args: argparse.Namespace, prog: str) -> int:
    setup_logging(args.log_level)
    try:
        cfg = load(args.config)
        registry = CollectorRegistry()
        service = MigrationService(cfg, MapperView(cfg), registry=registry)
    except (MigrateConfigError, JournalError) as exc:
        return fail(prog, exc, EXIT_USAGE)
    except OSError as exc:
        return fail(prog, f"{args.config}: state_dir: {exc.strerror or exc}", EXIT_USAGE)
    if cfg.metrics_port:
        start_http_server(cfg.metrics_port, registry=registry)
    if args.once:
        service.step()
        return 0
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: service.stop())
    log.info("migration service: %s, mode %s", cfg.fsname, cfg.mode,
             extra={"event": "migrate_start_service", "fsname": cfg.fsname, "mode": cfg.mode})
    service.run()
    return 0
