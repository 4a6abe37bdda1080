"""The migration service's configuration: the ``[migrate]`` table of a TOML file.

Example (``deploy/migrate.toml``)::

    [migrate]
    fsname = "scratch"
    mount = "/lustre/scratch"
    mode = "dry_run"              # then "on"
    ost_rate_mib_s = 1000         # one OST's bandwidth; the mapper's estimates scale it
    state_dir = "/var/lib/lustre-alloc/migrate"
    evacuate_after_s = 3600
    [migrate.budget]
    ost_share = 0.1
    max_per_oss = 2
    max_in_flight_ratio = 0.05

An unknown key or a bad value is one line naming the file and the key
(:class:`MigrateConfigError`).
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lustre_alloc.rebalance.budget import BudgetParams

MODES = ("dry_run", "on")
ROBINHOOD_KEYS = ("host", "port", "database", "user", "password_file")


class MigrateConfigError(ValueError):
    """A bad configuration: one line naming the file and the key."""


@dataclass(frozen=True)
class MigrateConfig:
    """The ``[migrate]`` table.

    Attributes:
        fsname: the file system (as the mapper serves it).
        mount: where it is mounted on this node (``lfs find`` runs under it).
        ost_rate_mib_s: one OST's bandwidth, MiB/s (a site's ``obdfilter-survey`` or IOR
            figure); each OST's is this times the mapper's speed estimate over the median.
        mode: ``dry_run`` (decide, log and report the moves; run nothing) or ``on``.
        mapper_socket: the mapper's admin socket (None: the packaged default).
        lfs: the ``lfs`` command.
        lfs_bandwidth_option: pass ``lfs migrate --bandwidth`` (Lustre 2.16+).
        layout_xattr: the extended attribute a file's layout is read from before it is
            planned and after a restart (``lustre.lov``, what a Lustre client serves; the
            emulated stack's stand-in keeps layouts under ``user.lustre_alloc.lov``).
        state_dir: the journal and the file lists live here.
        interval_s: one loop, s.
        evacuate_after_s: an OST the mapper has steered for slowness this long is
            evacuated, s (3600: a slow OST the steering kept through its minimum dwell and
            lease renewals for an hour is not a passing burst).
        quiet_s: a file modified within this many seconds is not moved yet (it may be
            being written; 3600).
        min_file_bytes: smaller files are not moved (per-file cost of ``lfs migrate``).
        max_attempts: a move that failed this many times is given up (logged, journaled).
        retry_s: a failed move waits this long before its next attempt, s.
        replan_s: the file lists and plan are rebuilt at least this often, s.
        fill_tolerance: with ``balance_fill``, OSTs fuller than ``(1 + x)`` times the mean
            fill shed files (the planner's tolerance, :class:`lustre_alloc.rebalance.plan.PlanTargets`).
        balance_fill: also move files off over-full OSTs (off by default: evacuation only).
        metrics_port: Prometheus metrics on this port (0: none).
        robinhood: ``[migrate.robinhood]`` (:data:`ROBINHOOD_KEYS`): list files from a
            Robinhood database (:mod:`lustre_alloc.rebalance.robinhood`) instead of ``lfs find``.
        pools: move only files whose layout names one of these pools (empty: any).
        paths: move only files under these directories (absolute, under ``mount``; empty:
            all).
        exclude: never move files whose path matches one of these shell patterns
            (:func:`fnmatch.fnmatchcase` on the whole path, e.g. ``"*/.snapshot/*"``).
        windows: start moves only inside these local-time windows
            (:mod:`lustre_alloc.rebalance.windows`, e.g. ``"22:00-06:00"``, ``"sat,sun 00:00-24:00"``;
            empty: always).
        budget: :class:`lustre_alloc.rebalance.budget.BudgetParams`.
    """
    fsname: str
    mount: str
    ost_rate_mib_s: float
    mode: str = "dry_run"
    mapper_socket: str | None = None
    lfs: str = "lfs"
    lfs_bandwidth_option: bool = False
    layout_xattr: str = "lustre.lov"
    state_dir: str = "/var/lib/lustre-alloc/migrate"
    interval_s: float = 10.0
    evacuate_after_s: float = 3600.0
    quiet_s: float = 3600.0
    min_file_bytes: int = 0
    max_attempts: int = 3
    retry_s: float = 600.0
    replan_s: float = 600.0
    fill_tolerance: float = 0.02
    balance_fill: bool = False
    metrics_port: int = 0
    robinhood: dict[str, Any] | None = None
    pools: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    windows: tuple[str, ...] = ()
    budget: BudgetParams = field(default_factory=BudgetParams)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.ost_rate_mib_s > 0:
            raise ValueError(f"ost_rate_mib_s must be > 0, got {self.ost_rate_mib_s}")
        for name in ("interval_s", "replan_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("evacuate_after_s", "quiet_s", "retry_s", "fill_tolerance"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if type(self.max_attempts) is not int or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        for name in ("pools", "paths", "exclude", "windows"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(x, str) for x in value):
                raise ValueError(f"{name} must be a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for p in self.paths:
            if not p.startswith("/"):
                raise ValueError(f"paths: {p!r} is not absolute")
        self.parsed_windows()

    def parsed_windows(self) -> tuple:
        """``windows`` parsed (:func:`lustre_alloc.rebalance.windows.parse_window`); ValueError."""
        from lustre_alloc.rebalance.windows import parse_window
        return tuple(parse_window(w) for w in self.windows)


def from_table(table: Any, where: str) -> MigrateConfig:
    """Build from a parsed ``[migrate]`` table; raises :class:`MigrateConfigError`."""
    if not isinstance(table, dict):
        raise MigrateConfigError(f"{where}: [migrate] must be a table")
    known = {f.name for f in dataclasses.fields(MigrateConfig)}
    for key in table:
        if key not in known:
            raise MigrateConfigError(f"{where}: migrate.{key}: unknown key "
                                     f"(known: {', '.join(sorted(known))})")
    args = dict(table)
    try:
        budget = args.pop("budget", {})
        if not isinstance(budget, dict):
            raise ValueError("budget must be a table")
        bknown = {f.name for f in dataclasses.fields(BudgetParams)}
        for key in budget:
            if key not in bknown:
                raise MigrateConfigError(f"{where}: migrate.budget.{key}: unknown key "
                                         f"(known: {', '.join(sorted(bknown))})")
        rbh = args.get("robinhood")
        if rbh is not None:
            if not isinstance(rbh, dict):
                raise ValueError("robinhood must be a table")
            for key in rbh:
                if key not in ROBINHOOD_KEYS:
                    raise MigrateConfigError(f"{where}: migrate.robinhood.{key}: unknown key "
                                             f"(known: {', '.join(ROBINHOOD_KEYS)})")
        return MigrateConfig(**args, budget=BudgetParams(**budget))
    except MigrateConfigError:
        raise
    except TypeError as exc:
        raise MigrateConfigError(f"{where}: migrate: {exc}") from None
    except ValueError as exc:
        raise MigrateConfigError(f"{where}: migrate: {exc}") from None


def load(path: str | Path) -> MigrateConfig:
    """Read ``path``'s ``[migrate]`` table; raises :class:`MigrateConfigError`."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise MigrateConfigError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise MigrateConfigError(f"{path}: {exc}") from None
    if "migrate" not in doc:
        raise MigrateConfigError(f"{path}: no [migrate] table")
    return from_table(doc["migrate"], str(path))
