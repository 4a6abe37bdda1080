"""Which requests the mapper places: the admin's ``[scope]`` table.

Everything else is answered ``EPERM`` ("outside the placement scope"), and the shim creates the
file with Lustre's own allocator, exactly as after any error reply (docs/protocol.md). The
shim still asks for everything its user's environment selects (``LUSTRE_ALLOC_PATHS``); the
admin narrows it here, on the MDS, without touching any job.

    [scope]
    place = true                        # false: place nothing (every file to Lustre)
    shadow = false                      # true: decide, apply nothing, answer "use Lustre's"
    paths = ["/lustre/scratch/climate"] # directory prefixes of the request's path (empty: any)
    exclude_paths = ["/lustre/scratch/climate/tmp"]
    pools = ["flash"]                   # the request's pool ("" = no pool; empty list: any)
    jobids = ["hacc*", "ior.*"]         # fnmatch patterns of the jobid (empty: any)
    exclude_jobids = ["*.debug"]
    uids = [20001, 20002]               # the creating process's effective uid (empty: any)
    gids = [5000]                       # its effective gid (empty: any)
    projids = [42]                      # the new file's Lustre project id (empty: any)

    [scope.fsnames]                     # per file system: true, false or "shadow"
    scratch2 = false
    scratch3 = "shadow"

A request is placed when placement is on for its file system, its path is under one of
``paths`` and under none of ``exclude_paths``, its pool is one of ``pools``, and its jobid
matches one of ``jobids`` and none of ``exclude_jobids`` (empty lists select everything).
Paths are compared component by component (``/a/b`` holds ``/a/b/c``, not ``/a/bc``).
``uids``, ``gids`` and ``projids`` compare what the shim sends: its effective uid and gid
and the project id the new file inherits from its directory (``lfs project -p ID -s DIR``;
read with ``FS_IOC_FSGETXATTR``). A request that does not carry the id a rule needs (an older
client, a directory whose project id cannot be read) is left to Lustre. These are the
client's claims, not credentials (the shim runs as the user): they select what the admin
wants placed, they do not control access.

Shadow mode (``shadow = true``, or ``"shadow"`` for one file system): a request in scope is
decided as usual (its choice booked as pending load until Lustre's layout is reported, which
then replaces it), nothing is applied, and the reply tells the shim to use Lustre's allocator
and report the layout Lustre chose (:mod:`lustre_alloc.mapper.shadow`, docs/operations.md "Rollout").
"""
from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, fields
from typing import Any, Mapping

from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.settings import setting
from lustre_alloc.mapper.service.wire import Owner

PLACE, SHADOW, OFF = "place", "shadow", "off"
"""The modes of a file system (:meth:`Scope.mode`)."""


@dataclass(frozen=True)
class Scope:
    """The ``[scope]`` rules (module docstring).

    Each key's unit, default and meaning are its :func:`~lustre_alloc.common.settings.setting`
    metadata (docs/operations.md's ``[scope]`` table is generated from them).
    """
    place: bool = setting(True, unit="true/false", doc="false: place nothing (every file to Lustre)")
    shadow: bool = setting(False, unit="true/false", doc=(
        "every file system in shadow mode: decide, apply nothing, answer \"use Lustre's\" and "
        "compare (the rollout's first step)"))
    paths: tuple[str, ...] = setting((), unit="absolute directories", doc=(
        "place only requests whose path is under one of these (component by component; "
        "empty: any)"))
    exclude_paths: tuple[str, ...] = setting((), unit="absolute directories", doc=(
        "never place requests under these"))
    pools: tuple[str, ...] = setting((), unit="pool names", doc=(
        "place only requests naming one of these pools (`\"\"`: no pool; empty: any)"))
    jobids: tuple[str, ...] = setting((), unit="fnmatch patterns", doc=(
        "place only requests whose jobid matches one (empty: any)"))
    exclude_jobids: tuple[str, ...] = setting((), unit="fnmatch patterns", doc=(
        "never place requests whose jobid matches one"))
    fsnames: Mapping[str, bool | str] = setting(factory=dict, unit="fsname -> mode", doc=(
        "`[scope.fsnames]`: per file system `true` (placed), `false` (off) or `\"shadow\"`"),
        shown="none")
    uids: tuple[int, ...] = setting((), unit="uids", doc=(
        "the creating process's effective uid must be one of these (empty: any; the client's "
        "claim, not a credential)"))
    gids: tuple[int, ...] = setting((), unit="gids", doc="its effective gid (empty: any)")
    projids: tuple[int, ...] = setting((), unit="project ids", doc=(
        "the new file's Lustre project id, inherited from its directory (empty: any)"))

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
        for key in ("uids", "gids", "projids"):
            value = table.get(key, [])
            if not isinstance(value, list) or not all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 32
                    for v in value):
                raise ConfigError(f"scope.{key} must be a list of integers 0..2^32-1")
            kw[key] = tuple(value)
        fs = table.get("fsnames", {})
        if not isinstance(fs, Mapping) or not all(isinstance(v, bool) or v == SHADOW
                                                  for v in fs.values()):
            raise ConfigError('scope.fsnames must map file system names to true, false or '
                              '"shadow"')
        kw["fsnames"] = dict(fs)
        return cls(**kw)

    def describe(self) -> str:
        """The rules in force as one line (``lustre-alloc-ctl status``): what is placed, in
        which mode, and every selector that is set."""
        if not self.place:
            return "nothing placed (place = false)"
        parts = ["shadow" if self.shadow else "live"]
        for key in ("paths", "exclude_paths", "pools", "jobids", "exclude_jobids", "uids",
                    "gids", "projids"):
            values = getattr(self, key)
            if values:
                parts.append(f"{key} {', '.join(map(str, values))}")
        if self.fsnames:
            parts.append("fsnames " + ", ".join(f"{k}={v}" for k, v in self.fsnames.items()))
        if len(parts) == 1:
            parts.append("every request")
        return "; ".join(parts)

    def mode(self, fsname: str) -> str:
        """``"place"``, ``"shadow"`` or ``"off"`` for the file system ``fsname``."""
        own = self.fsnames.get(fsname, True)
        if not self.place or own is False:
            return OFF
        return SHADOW if self.shadow or own == SHADOW else PLACE

    def why_not(self, fsname: str, path: str, pool: str | None, jobid: str,
                owner: Owner | None = None) -> str | None:
        """None when the request is placed; else the rule that leaves it to Lustre, one line.
        ``owner``: the uid, gid and project id the request carries (None: none)."""
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
        have = owner or Owner()
        for key, allowed, got in (("uid", self.uids, have.uid), ("gid", self.gids, have.gid),
                                  ("projid", self.projids, have.projid)):
            if allowed and got is None:
                return f"request carries no {key} (scope.{key}s)"
            if allowed and got not in allowed:
                return f"{key} {got} not in scope.{key}s"
        return None


def _under(path: str, prefix: str) -> bool:
    return bool(path) and (path == prefix or path.startswith(prefix.rstrip("/") + "/"))
