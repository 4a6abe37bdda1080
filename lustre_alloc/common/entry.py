"""The console scripts' entry points: each imports its command only when run, so that a
command whose extra is not installed says which one in one line (exit 2) instead of a
``ModuleNotFoundError`` traceback (a collector-only install has no numpy,
OR-Tools or matplotlib).
"""
from __future__ import annotations

import importlib
import sys
from typing import Sequence

COMMANDS = {
    "lustre-alloc-sim": ("lustre_alloc.simulator.cli", "sim"),
    "lustre-alloc-traces": ("lustre_alloc.traces.cli", "sim"),
    "lustre-alloc-demo": ("lustre_alloc.livestack.demo", "sim"),
    "lustre-alloc-collector": ("lustre_alloc.collectors.cli", "collector"),
    "lustre-alloc-broker": ("lustre_alloc.collectors.broker_cli", "collector"),
    "lustre-alloc-mapper": ("lustre_alloc.mapper.service.cli", "mapper"),
    "lustre-alloc-rebalance": ("lustre_alloc.rebalance.cli", "mapper"),
    "lustre-alloc-ctl": ("lustre_alloc.mapper.service.ctl", "mapper"),
    "lustre-alloc-selftest": ("lustre_alloc.selftest.cli", "collector"),
}
"""Command -> (module with ``main(argv)``, the extra that installs what it needs)."""
OURS = ("lustre_alloc", "lustre_alloc_data")


def launch(command: str, argv: Sequence[str] | None = None) -> int:
    """Run ``command``'s ``main(argv)``; exit status 2 with one line naming the extra to
    install when a third-party module it needs is missing."""
    module, extra = COMMANDS[command]
    try:
        main = importlib.import_module(module).main
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in OURS:
            raise
        print(f"{command}: error: needs the [{extra}] extra (module {missing!r} is not "
              f"installed): pip install 'lustre-alloc[{extra}]'", file=sys.stderr)
        return 2
    return main(argv)


def sim(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-sim", argv)


def traces(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-traces", argv)


def demo(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-demo", argv)


def collector(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-collector", argv)


def broker(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-broker", argv)


def mapper(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-mapper", argv)


def rebalance(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-rebalance", argv)


def ctl(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-ctl", argv)


def selftest(argv: Sequence[str] | None = None) -> int:
    return launch("lustre-alloc-selftest", argv)
