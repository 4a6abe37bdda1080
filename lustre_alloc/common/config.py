"""Configuration: one dataclass per command, read once at start from a TOML file (section
``[collector]`` or ``[broker]``) and then command-line flags, flags winning.

Example ``/etc/lustre-alloc/collector.toml``::

    [collector]
    role = "oss"
    broker = "tcp://mds1:5555"
    interval_s = 5.0
    compress = true
    curve_secret_key = "/etc/lustre-alloc/keys/oss01.key_secret"
    curve_server_key = "/etc/lustre-alloc/keys/broker.key"
"""
from __future__ import annotations

import dataclasses
import socket
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from lustre_alloc.common.curve import CurveClient, CurveServer
from lustre_alloc.common.cli import LOG_LEVELS
from lustre_alloc.common.errors import ConfigError


@dataclass(slots=True)
class CollectorConfig:
    """Settings of ``lustre-alloc-collector``.

    Attributes:
        role: ``oss`` or ``mds``.
        broker: broker frontend endpoint.
        root: directory holding ``proc/`` and ``sys/`` (``/`` on a server).
        interval_s: sampling interval, seconds (paper Section III-A: 5 s); samples are taken at
            multiples of it on the wall clock, so servers are aligned.
        host: name published (default: this host's name).
        source: ``auto`` (lctl if installed and root is ``/``), ``files`` or ``lctl``.
        lctl_command, lnetctl_command: argv of the commands.
        compress: zlib the payload.
        max_jobs: jobs per target per sample.
        curve_secret_key, curve_server_key: CURVE key files (both or neither; ``$VARS`` such
            as ``${CREDENTIALS_DIRECTORY}`` are expanded when the keys are loaded).
        metrics_port, metrics_addr: Prometheus ``/metrics`` (0: off; lustre_alloc/collectors/metrics.py).
        log_level: ``debug``, ``info``, ``warning``...
        steer_endpoint: bind endpoint of the steering agent (``lustre_alloc/collectors/steer_agent.py``),
            e.g. ``tcp://*:5561``; ``""`` (default): no agent, this collector never writes.
        steer_authorized_keys: directory of the public keys allowed to steer (the mapper's);
            with the CURVE keys above the agent is a CURVE server under this collector's
            own key pair. Required with ``steer_endpoint`` when CURVE is on.
        steer_max_lease_s: longest lease the agent grants, s.
        steer_journal: the agent's lease journal (``lustre_alloc/collectors/steer_agent.py``): what it set,
            kept across a crash so that a restarted agent restores it.
    """
    role: str = "oss"
    broker: str = "tcp://127.0.0.1:5555"
    root: str = "/"
    interval_s: float = 5.0
    host: str = field(default_factory=socket.gethostname)
    source: str = "auto"
    lctl_command: list[str] = field(default_factory=lambda: ["lctl"])
    lnetctl_command: list[str] = field(default_factory=lambda: ["lnetctl"])
    compress: bool = False
    max_jobs: int = 8
    curve_secret_key: str = ""
    curve_server_key: str = ""
    metrics_port: int = 0
    metrics_addr: str = "0.0.0.0"
    log_level: str = "info"
    steer_endpoint: str = ""
    steer_authorized_keys: str = ""
    steer_max_lease_s: float = 3600.0
    steer_journal: str = "/var/lib/lustre-alloc/steer-journal.json"

    def validate(self) -> "CollectorConfig":
        if self.role not in ("oss", "mds"):
            raise ConfigError(f"role must be oss or mds, not {self.role!r}")
        if not 0.05 <= self.interval_s <= 3600:
            raise ConfigError(f"interval_s {self.interval_s} outside 0.05..3600")
        if not 0 <= self.metrics_port <= 65_535:
            raise ConfigError("metrics_port must be 0..65535")
        if self.source not in ("auto", "files", "lctl"):
            raise ConfigError(f"source must be auto, files or lctl, not {self.source!r}")
        if bool(self.curve_secret_key) != bool(self.curve_server_key):
            raise ConfigError("curve_secret_key and curve_server_key go together")
        if self.max_jobs < 0:
            raise ConfigError("max_jobs must be >= 0")
        if self.steer_endpoint and self.curve_secret_key and not self.steer_authorized_keys:
            raise ConfigError("steer_endpoint with CURVE needs steer_authorized_keys (the "
                              "directory holding the mapper's public key)")
        if self.steer_authorized_keys and not self.curve_secret_key:
            raise ConfigError("steer_authorized_keys needs curve_secret_key (the agent serves "
                              "under this collector's key pair)")
        if not 0 < self.steer_max_lease_s <= 86_400:
            raise ConfigError("steer_max_lease_s must be in (0, 86400]")
        return self

    def curve(self) -> CurveClient | None:
        if not self.curve_secret_key:
            return None
        return CurveClient(self.curve_secret_key, self.curve_server_key)

    def steer_curve(self) -> CurveServer | None:
        """The steering agent's CURVE server keys, or None (plain TCP)."""
        if not self.steer_authorized_keys:
            return None
        return CurveServer(self.curve_secret_key, self.steer_authorized_keys)


@dataclass(slots=True)
class BrokerConfig:
    """Settings of ``lustre-alloc-broker``.

    Attributes:
        frontend: bind endpoint for collectors (XSUB).
        backend: bind endpoint for subscribers (XPUB).
        snapshot: bind endpoint for last-value cache requests (ROUTER).
        heartbeat_s: heartbeat period, seconds.
        backend_hwm: messages queued per slow subscriber.
        curve_secret_key, curve_authorized_keys: CURVE server key file and directory of
            authorised client public keys (both or neither).
        stats_interval_s: how often the broker logs its counters.
        require_curve: refuse to start without the CURVE keys (set by the packaged
            configuration; ``--insecure`` clears it for demos): an unkeyed publisher could
            otherwise pose as an OSS and steer allocations.
        metrics_port, metrics_addr: Prometheus ``/metrics`` (0: off).
        log_level: as for the collector.
    """
    frontend: str = "tcp://*:5555"
    backend: str = "tcp://*:5556"
    snapshot: str = "tcp://*:5557"
    heartbeat_s: float = 1.0
    backend_hwm: int = 100_000
    curve_secret_key: str = ""
    curve_authorized_keys: str = ""
    stats_interval_s: float = 60.0
    require_curve: bool = False
    metrics_port: int = 0
    metrics_addr: str = "0.0.0.0"
    log_level: str = "info"

    def validate(self) -> "BrokerConfig":
        if bool(self.curve_secret_key) != bool(self.curve_authorized_keys):
            raise ConfigError("curve_secret_key and curve_authorized_keys go together")
        if self.require_curve and not self.curve_secret_key:
            raise ConfigError("require_curve is set but curve_secret_key and "
                              "curve_authorized_keys are empty: give the key files "
                              "(lustre-alloc-broker --keygen), or pass --insecure (demos only)")
        if not 0 <= self.metrics_port <= 65_535:
            raise ConfigError("metrics_port must be 0..65535")
        if self.heartbeat_s <= 0:
            raise ConfigError("heartbeat_s must be > 0")
        return self

    def curve(self) -> CurveServer | None:
        if not self.curve_secret_key:
            return None
        return CurveServer(self.curve_secret_key, self.curve_authorized_keys)


def load(cls: type, path: str | None, section: str, overrides: Mapping[str, Any]) -> Any:
    """Build ``cls`` from the TOML ``section`` of ``path`` (if given), then ``overrides``
    (flags; ``None`` values ignored), and validate it.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key, wrong type, unknown log level.
    """
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{section}] is not a table")
        values.update(table)
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown {section} setting(s): {', '.join(unknown)}")
    if "log_level" in values and str(values["log_level"]).lower() not in LOG_LEVELS:
        raise ConfigError(f"{section}.log_level {values['log_level']!r}: expected one of "
                          f"{', '.join(LOG_LEVELS)}")
    for name, value in values.items():
        default = getattr(cls(), name)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{section}.{name} must be true or false")
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            values[name] = float(value)
        elif isinstance(default, list) and isinstance(value, str):
            values[name] = value.split()
        elif not isinstance(value, type(default)) and not (isinstance(default, float)
                                                           and isinstance(value, (int, float))):
            raise ConfigError(f"{section}.{name} must be {type(default).__name__}")
    return cls(**values).validate()
