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

from lustre_alloc.common.settings import setting, settings_of
from lustre_alloc.rebalance.budget import BudgetParams

MODES = ("dry_run", "on")
ROBINHOOD_KEYS = ("host", "port", "database", "user", "password_file")


class MigrateConfigError(ValueError):
    """A bad configuration: one line naming the file and the key."""


@dataclass(frozen=True)
class MigrateConfig:
    """The ``[migrate]`` table. Each key's unit, default and source are its
    :func:`~lustre_alloc.common.settings.setting` metadata (docs/rebalance.md's table is
    generated from them); ``budget`` is ``[migrate.budget]``
    (:class:`lustre_alloc.rebalance.budget.BudgetParams`), ``robinhood`` is
    ``[migrate.robinhood]`` (:data:`ROBINHOOD_KEYS`)."""
    fsname: str = setting(unit="fsname", doc="the file system, as the mapper serves it")
    mount: str = setting(unit="directory", doc="where it is mounted on this node (`lfs find` runs under it)")
    ost_rate_mib_s: float = setting(unit="MiB/s", doc=(
        "one OST's bandwidth (a site's `obdfilter-survey` or IOR figure); each OST's is this "
        "times the mapper's speed estimate over the median"))
    mode: str = setting("dry_run", unit="dry_run/on", doc=(
        "`dry_run`: decide, log and report the moves, run nothing (review `plan.json`); "
        "`on`: move"))
    mapper_socket: str | None = setting(None, unit="endpoint", doc=(
        "the mapper's admin socket"), shown="the packaged default")
    lfs: str = setting("lfs", unit="command", doc="the `lfs` command")
    lfs_bandwidth_option: bool = setting(False, unit="true/false", doc=(
        "cap each move's copy with `lfs migrate -W` (Lustre 2.16+ clients); false: moves run "
        "uncapped and the budget spaces their starts"),
        source="lustre/utils/lfs.c 2.16.0 `migrate_copy_data()`; checked on 2.17.0")
    layout_xattr: str = setting("lustre.lov", unit="xattr name", development=True, doc=(
        "where a file's layout is read: `lustre.lov` on a Lustre client; the emulated "
        "stack's stand-in keeps layouts under `user.lustre_alloc.lov`"))
    state_dir: str = setting("/var/lib/lustre-alloc/migrate", unit="directory", doc=(
        "the journal, the file lists, `status.json`, `plan.json` and the admin's orders"))
    interval_s: float = setting(10.0, unit="s", doc="one loop: ends, settling, starts")
    evacuate_after_s: float = setting(3600.0, unit="s", doc=(
        "an OST the mapper has steered for slowness this long is evacuated"),
        source="a slow OST the steering kept through its minimum dwell and lease renewals "
               "for an hour is not a passing burst")
    quiet_s: float = setting(3600.0, unit="s", doc=(
        "a file modified within this long is not moved yet (it may be being written)"))
    min_file_bytes: int = setting(0, unit="bytes", doc=(
        "smaller files are not moved (each `lfs migrate` has a fixed cost)"))
    max_attempts: int = setting(3, unit="attempts", doc=(
        "a move that failed this many times is given up (logged, journaled)"))
    retry_s: float = setting(600.0, unit="s", doc="a failed move waits this long before its next attempt")
    replan_s: float = setting(600.0, unit="s", doc="the file lists and plan are rebuilt at least this often")
    fill_tolerance: float = setting(0.02, unit="share of the mean fill", doc=(
        "with `balance_fill`, OSTs fuller than (1 + this) x the mean fill shed files (the "
        "plan's tolerance)"))
    balance_fill: bool = setting(False, unit="true/false", doc=(
        "also move files off over-full OSTs (off: evacuation only)"))
    metrics_port: int = setting(0, unit="TCP port", doc="Prometheus `/metrics` (0: off)",
                                shown="0 (off)")
    robinhood: dict[str, Any] | None = setting(None, unit="table", doc=(
        "`[migrate.robinhood]` (`host`, `port`, `database`, `user`, `password_file`): list "
        "files from a Robinhood database instead of `lfs find`"), shown="none")
    pools: tuple[str, ...] = setting((), unit="pool names", doc=(
        "move only files whose layout names one of these pools (empty: any)"))
    paths: tuple[str, ...] = setting((), unit="absolute directories", doc=(
        "move only files under these directories (empty: the mount)"))
    exclude: tuple[str, ...] = setting((), unit="shell patterns", doc=(
        "never move files whose whole path matches one (e.g. `\"*/.snapshot/*\"`)"))
    windows: tuple[str, ...] = setting((), unit="local-time windows", doc=(
        "start moves only inside these (e.g. `\"22:00-06:00\"`, `\"sat,sun 00:00-24:00\"`; "
        "empty: always)"))
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
    development = {f.name for f, _ in settings_of(MigrateConfig, development=True)}
    known = {f.name for f in dataclasses.fields(MigrateConfig)} - development
    for key in table:
        if key in development:
            raise MigrateConfigError(f"{where}: migrate.{key} is a development switch: set "
                                     f"it in [migrate.development]")
        if key not in known and key != "development":
            raise MigrateConfigError(f"{where}: migrate.{key}: unknown key "
                                     f"(known: {', '.join(sorted(known))})")
    args = dict(table)
    dev = args.pop("development", {})
    if not isinstance(dev, dict) or not set(dev) <= development:
        raise MigrateConfigError(f"{where}: [migrate.development] takes "
                                 f"{', '.join(sorted(development))}")
    args.update(dev)
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
