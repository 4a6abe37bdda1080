"""Which requests the mapper places: the admin's ``[scope]`` table (issue #30).

Everything else is answered ``EPERM`` ("outside the placement scope"), and the shim creates the
file with Lustre's own allocator, exactly as after any error reply (docs/protocol.md). The
shim still asks for everything its user's environment selects (``LUSTRE_ALLOC_PATHS``); the
admin narrows it here, on the MDS, without touching any job.

    [scope]
    place = true                        # false: place nothing (every file to Lustre)
    shadow = false                      # true: decide, book nothing, answer "use Lustre's"
    paths = ["/lustre/scratch/climate"] # directory prefixes of the request's path (empty: any)
    exclude_paths = ["/lustre/scratch/climate/tmp"]
    pools = ["flash"]                   # the request's pool ("" = no pool; empty list: any)
    jobids = ["hacc*", "ior.*"]         # fnmatch patterns of the jobid (empty: any)
    exclude_jobids = ["*.debug"]

    [scope.fsnames]                     # per file system: true, false or "shadow"
    scratch2 = false
    scratch3 = "shadow"

A request is placed when placement is on for its file system, its path is under one of
``paths`` and under none of ``exclude_paths``, its pool is one of ``pools``, and its jobid
matches one of ``jobids`` and none of ``exclude_jobids`` (empty lists select everything).
Paths are compared component by component (``/a/b`` holds ``/a/b/c``, not ``/a/bc``).
Not available: uid, gid and Lustre project ids, which requests do not carry (protocol v1).

Shadow mode (``shadow = true``, or ``"shadow"`` for one file system): a request in scope is
decided as usual, nothing is booked, and the reply tells the shim to use Lustre's allocator
and report the layout Lustre chose (:mod:`mapper.shadow`, docs/operations.md "Rollout").
"""
from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from common.errors import ConfigError

PLACE, SHADOW, OFF = "place", "shadow", "off"
"""The modes of a file system (:meth:`Scope.mode`)."""


@dataclass(frozen=True)
class Scope:
    """The ``[scope]`` rules (module docstring).

    Attributes:
        place: False places nothing.
        paths, exclude_paths: absolute directory prefixes.
        pools: pool names (``""``: the request names no pool).
        jobids, exclude_jobids: fnmatch patterns.
        shadow: True: every file system in shadow mode (module docstring).
        fsnames: file system name -> True (placed), False (off) or ``"shadow"``.
    """
    place: bool = True
    shadow: bool = False
    paths: tuple[str, ...] = ()
    exclude_paths: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    jobids: tuple[str, ...] = ()
    exclude_jobids: tuple[str, ...] = ()
    fsnames: Mapping[str, bool | str] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "Scope":
        """From the TOML table.

        Raises:
            ConfigError: one line naming ``scope.<key>``.
        """
        if not isinstance(table, Mapping):
            raise ConfigError("scope must be a table [scope]")
        known = {f.name for f in fields(cls)}
        for key in table:
            if key not in known:
                raise ConfigError(f"scope.{key}: unknown key (known: {', '.join(sorted(known))})")
        kw: dict[str, Any] = {}
        for key in ("place", "shadow"):
            if key in table:
                if not isinstance(table[key], bool):
                    raise ConfigError(f"scope.{key} must be true or false")
                kw[key] = table[key]
        for key in ("paths", "exclude_paths", "pools", "jobids", "exclude_jobids"):
            value = table.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"scope.{key} must be a list of strings")
            if key.endswith("paths"):
                bad = [v for v in value if not v.startswith("/")]
                if bad:
                    raise ConfigError(f"scope.{key}: {bad[0]!r} is not an absolute path")
                value = [posixpath.normpath(v) for v in value]
            kw[key] = tuple(value)
        fs = table.get("fsnames", {})
        if not isinstance(fs, Mapping) or not all(isinstance(v, bool) or v == SHADOW
                                                  for v in fs.values()):
            raise ConfigError('scope.fsnames must map file system names to true, false or '
                              '"shadow"')
        kw["fsnames"] = dict(fs)
        return cls(**kw)

    def mode(self, fsname: str) -> str:
        """``"place"``, ``"shadow"`` or ``"off"`` for the file system ``fsname``."""
        own = self.fsnames.get(fsname, True)
        if not self.place or own is False:
            return OFF
        return SHADOW if self.shadow or own == SHADOW else PLACE

    def why_not(self, fsname: str, path: str, pool: str | None, jobid: str) -> str | None:
        """None when the request is placed; else the rule that leaves it to Lustre, one line."""
        if not self.place:
            return "placement is off (scope.place)"
        if self.fsnames.get(fsname, True) is False:
            return f"placement is off for file system {fsname!r} (scope.fsnames)"
        norm = posixpath.normpath(path) if path else ""
        if self.paths and not any(_under(norm, p) for p in self.paths):
            return "path outside scope.paths"
        if any(_under(norm, p) for p in self.exclude_paths):
            return "path under scope.exclude_paths"
        if self.pools and (pool or "") not in self.pools:
            return f"pool {pool or '(none)'!r} not in scope.pools"
        if self.jobids and not any(fnmatch.fnmatchcase(jobid, p) for p in self.jobids):
            return "jobid matches no scope.jobids pattern"
        if any(fnmatch.fnmatchcase(jobid, p) for p in self.exclude_jobids):
            return "jobid matches scope.exclude_jobids"
        return None


def _under(path: str, prefix: str) -> bool:
    return bool(path) and (path == prefix or path.startswith(prefix.rstrip("/") + "/"))
