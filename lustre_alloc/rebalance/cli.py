"""``lustre-alloc-rebalance run --config FILE`` (and, through :mod:`lustre_alloc.rebalance.plan_command`,
``plan``): the migration service
(:mod:`lustre_alloc.rebalance.service`), asking the mapper through its admin socket; and an admin's
commands to it (:mod:`lustre_alloc.rebalance.admin`, through its state directory):

* ``drain --config FILE OST..`` / ``undrain``: evacuate an OST the admin names / stop;
* ``pause --config FILE [--reason TEXT]`` / ``resume``: start no move / start again;
* ``status --config FILE [--json]``: per evacuated OST what is left, the rate, the ETA and
  ``drained``; ``--moves`` adds the current plan's moves (review them in ``dry_run``).

Exit status: 0 after SIGTERM/SIGINT (running moves are stopped; their files keep their old
layout and are retried at the next start); 2 for a bad configuration, journal, OST name or
admin file (one line).
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from lustre_alloc.common.cli import EXIT_USAGE, fail
from lustre_alloc.common.logs import setup_logging
from lustre_alloc.rebalance import admin
from lustre_alloc.rebalance.config import MigrateConfig, MigrateConfigError, load
from lustre_alloc.rebalance.journal import JournalError
from lustre_alloc.rebalance.service import MigrationService, ViewError

log = logging.getLogger("lustre_alloc.rebalance.cli")


class MapperView:
    """The mapper's ``migration_view`` over its admin socket
    (:mod:`lustre_alloc.mapper.service.migration_view`)."""

    def __init__(self, cfg: MigrateConfig, timeout_s: float = 15.0):
        self.fsname, self.timeout_s = cfg.fsname, timeout_s
        self.socket = cfg.mapper_socket

    def view(self, report: dict[str, Any]) -> dict[str, Any]:
        from lustre_alloc.mapper.service.ctl import CtlError, ask, default_socket
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
    """``lustre-alloc-rebalance``: ``plan`` (:mod:`lustre_alloc.rebalance.plan_command`) and ``run``."""
    from lustre_alloc.rebalance.plan_command import main as rebalance_main
    return rebalance_main(argv, {"run": (add_run_parser, cmd_run),
                                 **{name: (_adder(name), cmd_admin) for name in ADMIN_COMMANDS}})


ADMIN_COMMANDS = {
    "drain": "evacuate these OSTs (an index, OSTxxxx or <fsname>-OSTxxxx)",
    "undrain": "stop evacuating these OSTs",
    "pause": "start no move until resumed (running moves finish)",
    "resume": "start moves again",
    "status": "what is left per evacuated OST, the rate, the ETA",
}


def _adder(name: str):
    def add(sub: Any) -> None:
        p = sub.add_parser(name, help=ADMIN_COMMANDS[name])
        p.add_argument("--config", required=True, help="the service's TOML file ([migrate])")
        if name in ("drain", "undrain"):
            p.add_argument("osts", nargs="+", metavar="OST")
        if name == "pause":
            p.add_argument("--reason", default="", help="shown in status")
        if name == "status":
            p.add_argument("--json", action="store_true", help="the status as JSON")
            p.add_argument("--moves", action="store_true", help="also the planned moves")
    return add


def cmd_admin(args: argparse.Namespace, prog: str) -> int:
    """``drain``/``undrain``/``pause``/``resume``/``status`` (module doc)."""
    try:
        cfg = load(args.config)
        if args.cmd == "status":
            st = admin.read_status(cfg.state_dir)
            if args.moves:
                plan = Path(cfg.state_dir) / admin.PLAN_FILE
                st["plan"] = json.loads(plan.read_text()) if plan.exists() else None
            print(json.dumps(st, indent=1) if args.json else
                  admin.format_status(st, time.time()) + (
                      "" if not args.moves or not st.get("plan") else "\n" + "\n".join(
                          f"  move {m['file']}: OSTs {m['from']} -> {m['to']} "
                          f"({m['bytes']} B, {m['why']})" for m in st["plan"]["moves"])))
            return 0
        orders = admin.read_orders(cfg.state_dir)
        now = time.time()
        if args.cmd in ("drain", "undrain"):
            osts = [admin.parse_ost(o) for o in args.osts]
            for o in osts:
                if args.cmd == "drain":
                    orders.drains.setdefault(o, {"since_s": now})
                else:
                    orders.drains.pop(o, None)
        elif args.cmd == "pause":
            orders.paused = {"since_s": now, "reason": args.reason}
        else:
            orders.paused = None
        admin.write_orders(cfg.state_dir, orders)
    except (MigrateConfigError, admin.AdminError) as exc:
        return fail(prog, exc, EXIT_USAGE)
    except OSError as exc:
        return fail(prog, f"{args.config}: state_dir: {exc.strerror or exc}", EXIT_USAGE)
    print(f"{prog} {args.cmd}: done; drains {sorted(orders.drains) or 'none'}, "
          f"{'paused' if orders.paused else 'not paused'} (the service reads it at its next "
          f"loop)")
    return 0


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
