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
from dataclasses import dataclass
from typing import Any, Mapping

from lustre_alloc.common.curve import CurveClient, CurveServer
from lustre_alloc.common.cli import LOG_LEVELS
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.settings import setting


@dataclass(slots=True)
class CollectorConfig:
    """Settings of ``lustre-alloc-collector``: the ``[collector]`` table. Each key's unit,
    default and source are its :func:`~lustre_alloc.common.settings.setting` metadata
    (docs/operations.md's table is generated from them)."""
    role: str = setting("oss", unit="oss/mds", doc="what this server is: an OSS or an MDS")
    broker: str = setting("tcp://127.0.0.1:5555", unit="endpoint", doc=(
        "the broker's frontend, where samples are published"))
    root: str = setting("/", unit="directory", doc=(
        "the directory holding `proc/` and `sys/` (`/` on a server; a fixture tree in tests)"))
    interval_s: float = setting(5.0, unit="s", doc=(
        "sampling interval; samples are taken at multiples of it on the wall clock, so "
        "servers are aligned"), source="Paul et al. 2017, Section III-A: 5 s")
    host: str = setting(factory=socket.gethostname, unit="name", doc=(
        "the name published (the mapper's `[steer.oss_agents]` keys are these)"),
        shown="this host's name")
    source: str = setting("auto", unit="auto/files/lctl", doc=(
        "`lctl`: `lctl get_param`; `files`: read /proc and /sys; `auto`: lctl when installed "
        "and `root` is `/`, else the files"))
    lctl_command: list[str] = setting(factory=lambda: ["lctl"], unit="argv", doc=(
        "the `lctl` command"))
    lnetctl_command: list[str] = setting(factory=lambda: ["lnetctl"], unit="argv", doc=(
        "the `lnetctl` command"))
    compress: bool = setting(False, unit="true/false", doc="zlib the payload")
    max_jobs: int = setting(8, unit="jobs", doc=(
        "job_stats entries per target per sample, busiest first (docs/protocol.md \"Jobs\")"))
    curve_secret_key: str = setting("", unit="path", doc=(
        "this collector's CURVE secret key (with `curve_server_key`; `$VARS` such as "
        "`${CREDENTIALS_DIRECTORY}` are expanded)"), shown="none")
    curve_server_key: str = setting("", unit="path", doc="the broker's public key",
                                    shown="none")
    metrics_port: int = setting(0, unit="TCP port", doc="Prometheus `/metrics` (0: off)",
                                shown="0 (off)")
    metrics_addr: str = setting("0.0.0.0", unit="address", doc="the address `/metrics` binds")
    log_level: str = setting("info", unit="level", doc="`debug`, `info`, `warning`, `error`")
    steer_endpoint: str = setting("", unit="endpoint", doc=(
        "bind endpoint of the steering agent (e.g. `tcp://*:5561`); empty: no agent, this "
        "collector never writes"), shown="none")
    steer_authorized_keys: str = setting("", unit="directory", doc=(
        "the public keys allowed to steer (the mapper's); required with `steer_endpoint` "
        "when CURVE is on"), shown="none")
    steer_max_lease_s: float = setting(3600.0, unit="s", doc=(
        "the longest lease the agent grants (a mapper asking more gets this)"))
    steer_journal: str = setting("/var/lib/lustre-alloc/steer-journal.json", unit="path", doc=(
        "what the agent set, kept across a crash so that a restarted agent restores it"))

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
    """Settings of ``lustre-alloc-broker``: the ``[broker]`` table. Each key's unit, default
    and source are its :func:`~lustre_alloc.common.settings.setting` metadata."""
    frontend: str = setting("tcp://*:5555", unit="endpoint", doc="where collectors publish (XSUB)")
    backend: str = setting("tcp://*:5556", unit="endpoint", doc="where the mapper subscribes (XPUB)")
    snapshot: str = setting("tcp://*:5557", unit="endpoint", doc=(
        "last-value cache requests (ROUTER): a new subscriber gets every server's last "
        "sample at once"))
    heartbeat_s: float = setting(1.0, unit="s", doc=(
        "heartbeat period: subscribers see the broker alive, and a restart by its new epoch"))
    backend_hwm: int = setting(100_000, unit="messages", doc=(
        "messages queued per slow subscriber, then dropped for it"))
    curve_secret_key: str = setting("", unit="path", doc=(
        "the broker's CURVE secret key (with `curve_authorized_keys`)"), shown="none")
    curve_authorized_keys: str = setting("", unit="directory", doc=(
        "public keys of every collector and of the mapper"), shown="none")
    stats_interval_s: float = setting(60.0, unit="s", doc="how often the broker logs its counters")
    require_curve: bool = setting(False, unit="true/false", doc=(
        "refuse to start without the CURVE keys (the packaged configuration sets it; "
        "`--insecure` clears it for demos): an unkeyed publisher could pose as an OSS"))
    metrics_port: int = setting(0, unit="TCP port", doc="Prometheus `/metrics` (0: off)",
                                shown="0 (off)")
    metrics_addr: str = setting("0.0.0.0", unit="address", doc="the address `/metrics` binds")
    log_level: str = setting("info", unit="level", doc="`debug`, `info`, `warning`, `error`")

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
