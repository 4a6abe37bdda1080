"""Reloading the mapper's configuration on SIGHUP (``systemctl reload``).

The signal handler only asks (:meth:`Reloader.request`); the service's loop does the work
between two rounds (:meth:`Reloader.apply_if_requested`), so no request sees a half-applied
configuration. A reload:

1. reads the configuration file again with the same command-line overrides
   (:func:`lustre_alloc.mapper.service.config.load_config`) and checks its CURVE key files. A file that
   fails is rejected with one line (``event=reload_rejected``) and the running configuration
   is kept whole.
2. re-reads the authorised client keys directory (``serve_curve_authorized_keys``), so a key
   added or removed there takes effect without a restart: new connections are checked against
   the new set (connections already made stay until they close);
3. applies the keys of :data:`RELOADABLE` (the ``[scope]`` rules from the next request on).
   The ``[steer]`` table restarts the steering loop,
   which first releases every action in force, so the new loop decides afresh;
4. logs the changed keys that need a restart (:data:`RELOADABLE` lists the others), and keeps
   their running values.

Counted as ``lustre_alloc_mapper_reloads_total{result}`` (``applied``, ``rejected``).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping

from lustre_alloc.common.curve import expand
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.mapper.service.config import PEER_BURST_S, MapperConfig, load_config

log = logging.getLogger("lustre_alloc.mapper.service.reload")

RELOADABLE = ("serve_curve_authorized_keys", "peer_requests_per_s",
              "peer_new_apps_per_min", "peer_max_apps", "mds_cpu_limit_percent",
              "round_budget_s", "log_level", "decision_log_per_s", "steer", "scope")
"""Configuration keys a reload applies; any other key changes only at a restart."""


def changed_keys(old: MapperConfig, new: MapperConfig) -> list[str]:
    """Names of the keys whose values differ, in field order."""
    return [f.name for f in dataclasses.fields(MapperConfig)
            if getattr(old, f.name) != getattr(new, f.name)]


class Reloader:
    """SIGHUP reload of one service.

    Args:
        service: the running :class:`lustre_alloc.mapper.service.server.MapperService`.
        path: the configuration file (None: flags only; a reload re-reads the keys directory).
        overrides: the command-line overrides the service started with.
    """

    def __init__(self, service: Any, path: str | None, overrides: Mapping[str, Any]):
        self.service = service
        self.path = path
        self.overrides = dict(overrides)
        self.pending = False
        self.applied = 0
        self.rejected = 0
        self.last_error = ""
        """Why the last rejected reload was rejected (one line)."""
        self.last_changed: list[str] = []
        """The reloadable keys the last applied reload changed."""
        self.last_needs_restart: list[str] = []
        """The keys the last applied reload found changed that only a restart applies
        (they keep their running values)."""

    def request(self) -> None:
        """Ask for a reload (safe in a signal handler: sets a flag)."""
        self.pending = True

    def apply_if_requested(self) -> bool | None:
        """Reload if asked; True applied, False rejected, None not asked."""
        if not self.pending:
            return None
        self.pending = False
        return self.apply()

    def apply(self) -> bool:
        """Reload now (the module docstring's steps); True when applied."""
        svc = self.service
        try:
            new = load_config(self.path, self.overrides)
            for keys in (new.curve(), new.serve_curve()):
                if keys is not None:
                    keys.check()
        except ConfigError as exc:
            self.last_error = str(exc)
            self.rejected += 1
            svc.metrics.reloads.labels("rejected").inc()
            log.error("reload rejected, configuration kept: %s", exc,
                      extra={"event": "reload_rejected", "error": str(exc)})
            return False
        old = svc.config
        changed = changed_keys(old, new)
        restart = [k for k in changed if k not in RELOADABLE]
        applied = [k for k in changed if k in RELOADABLE]
        auth = svc.sockets.auth
        if auth is not None and new.serve_curve_authorized_keys:
            auth.configure_curve(domain="*", location=expand(new.serve_curve_authorized_keys))
        limits = svc.limits
        limits.requests_per_s = new.peer_requests_per_s
        limits.request_burst = max(1, int(new.peer_requests_per_s * PEER_BURST_S))
        limits.new_apps_per_min = new.peer_new_apps_per_min
        limits.max_apps = new.peer_max_apps
        for ctx in svc.contexts.values():
            ctx.gate.mds_cpu_limit_percent = new.mds_cpu_limit_percent
            ctx.gate.round_budget_s = new.round_budget_s
        scope = new.scope_rules()
        if scope != svc.intake.scope:
            svc.metrics.scope_changes.inc()
            log.warning("the scope in force changed: %s", scope.describe(),
                        extra={"event": "scope_changed", "scope": scope.describe()})
        svc.intake.scope = scope
        svc.desk.log.per_s = new.decision_log_per_s
        if new.log_level != old.log_level:
            logging.getLogger().setLevel(new.log_level.upper())
        kept = {k: getattr(old, k) for k in restart}
        svc.config = dataclasses.replace(new, **kept)
        if "steer" in applied:
            svc.restart_steering()
        self.last_changed = applied
        self.last_needs_restart = restart
        self.applied += 1
        svc.metrics.reloads.labels("applied").inc()
        log.info("configuration reloaded", extra={"event": "reload", "changed": applied,
                                                  "keys_reread": auth is not None})
        if restart:
            log.warning("changed keys need a restart and keep their running values: %s",
                        ", ".join(restart),
                        extra={"event": "reload_needs_restart", "keys": restart})
        return True
