"""Configuration of ``lustre-alloc-mapper``: one dataclass, read once at start from the TOML
table ``[mapper]`` and then command-line flags, flags winning (the collectors' loader,
:func:`lustre_alloc.common.config.load`, applies both and checks names and types).

Example ``/etc/lustre-alloc/mapper.toml`` (all keys optional; ``lustre_alloc/mapper/service/systemd/
mapper.toml.example`` is the annotated version)::

    [mapper]
    bind = "tcp://*:5558"
    broker_backend = "tcp://127.0.0.1:5556"
    broker_snapshot = "tcp://127.0.0.1:5557"
    policy = "mcmf"
    fallback = "lustre_qos"
    state_file = "/var/lib/lustre-alloc/mapper-state.json"
    metrics_port = 9558

    [mapper.pools]
    flash = [0, 1, 2, 3]

    [policy.mcmf]               # parameters of the primary (any [policy.<name>] table)
    predict_k = 4
    straggler_factor = 2.0

    [policy.mcmf.cost_params]
    space_weight = 1.0

Each ``[policy.<name>]`` table holds keyword parameters of that policy's constructor,
exactly as a scenario's ``[policy_params.<name>]`` (docs/operations.md, "Tuning the
policy"); an unknown key is refused with one line naming it.
"""
from __future__ import annotations

import logging
import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from lustre_alloc.common.config import load
from lustre_alloc.common.curve import CurveClient, CurveServer
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.runtime_dir import hand_started_control
from lustre_alloc.common.settings import setting, settings_of
from lustre_alloc.mapper.policies import registry
from lustre_alloc.mapper.policies.gate import MDS_CPU_LIMIT_PERCENT

log = logging.getLogger("lustre_alloc.mapper.service.config")

if TYPE_CHECKING:
    from lustre_alloc.mapper.service.scope import Scope
    from lustre_alloc.mapper.steer.agents import SteerConfig

TOP_TABLES = ("mapper", "policy", "steer", "scope", "development")
"""The top-level tables of a mapper configuration; any other name is refused."""
REMOVED = {("mapper", "peer_request_burst"): "a client's burst is 2 s of peer_requests_per_s "
                                              "(PEER_BURST_S)"}
"""(table, key) -> why: keys removed because a measured default serves; refused with one
line saying so."""
PEER_BURST_S = 2.0
"""A client may send this many seconds of ``peer_requests_per_s`` at once (the token bucket's
depth): the default pair was 10000/s and 20000, and nothing measured asked for another."""
RENAMED = (("mapper", "lease_s", "layout_lease_s"), ("steer", "lease_s", "action_lease_s"))
"""(table, old key, new key): keys renamed so that no two tables share a name with two
meanings; the old name is refused with one line giving the new one."""
DEFAULT_POLICY = "mcmf"
DEFAULT_FALLBACK = "lustre_qos"
_STATIC = re.compile(r"^(\d+)x(\d+)$")


def local_endpoint(endpoint: str) -> bool:
    """True for a ZeroMQ endpoint only this host reaches: ``ipc://``, ``inproc://``, or TCP on
    a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    if not endpoint.startswith("tcp://"):
        return False
    host = endpoint[len("tcp://"):].rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


@dataclass(slots=True)
class MapperConfig:
    """Settings of ``lustre-alloc-mapper``: the ``[mapper]`` table (and, for the development
    switches, the ``[development]`` table and flags).

    Each field's unit, default, meaning and the source of its default are its
    :func:`~lustre_alloc.common.settings.setting` metadata; docs/operations.md's table is
    generated from them (``scripts/settings_tables.py``). ``policy_params``,
    ``steer`` and ``scope`` hold the top-level ``[policy.<name>]``, ``[steer]`` and
    ``[scope]`` tables, checked by their own classes.
    """
    bind: str = setting("tcp://*:5558", unit="endpoint", doc=(
        "the request socket (ROUTER) the shim connects to; `--bind`"),
        source="docs/protocol.md, port 5558")
    broker_backend: str = setting("tcp://127.0.0.1:5556", unit="endpoint", doc=(
        "the broker's XPUB to subscribe to (ignored with `embed_broker`)"))
    broker_snapshot: str = setting("tcp://127.0.0.1:5557", unit="endpoint", doc=(
        "the broker's last-value cache (ignored with `embed_broker`)"))
    embed_broker: bool = setting(False, unit="true/false", doc=(
        "run the broker inside the mapper process, bound on `broker_frontend`, "
        "`broker_backend_bind`, `broker_snapshot_bind`"))
    broker_frontend: str = setting("tcp://*:5555", unit="endpoint", doc=(
        "with `embed_broker`: where collectors connect"))
    broker_backend_bind: str = setting("tcp://*:5556", unit="endpoint", doc=(
        "with `embed_broker`: the XPUB bind endpoint"))
    broker_snapshot_bind: str = setting("tcp://*:5557", unit="endpoint", doc=(
        "with `embed_broker`: the last-value cache bind endpoint"))
    static_cluster: str = setting("", unit="OSSes x OSTs", development=True, doc=(
        "serve an emulated uniform cluster (e.g. `4x2`) that never goes stale, no broker: "
        "tests and shim development; `--static-cluster`"), shown="off")
    static_kbytes_total: int = setting(1 << 32, unit="KiB", development=True, doc=(
        "size of each emulated OST of `static_cluster`"), shown="2^32")
    policy: str = setting(DEFAULT_POLICY, unit="policy name", doc=(
        "the primary placement policy (`lustre_alloc.mapper.policies.registry`); `--policy`"),
        source="Paul et al. 2017, Section III")
    fallback: str = setting(DEFAULT_FALLBACK, unit="policy name", doc=(
        "the policy used when the gate says no: Lustre's own allocator"),
        source="Section III-D")
    seed: int = setting(0, unit="integer", development=True, doc=(
        "the policies' random seed (repeatable tests); `--seed`"))
    mds_cpu_limit_percent: float = setting(MDS_CPU_LIMIT_PERCENT, unit="%", doc=(
        "fall back to `fallback` at or above this MDS CPU"), source="Section III-D: 70")
    stale_after_s: float = setting(0.0, unit="s", doc=(
        "fall back when a usable OST's server sent nothing for this long; 0: twice the "
        "collectors' interval"), shown="0 (2 x interval)")
    round_budget_s: float = setting(0.010, unit="s", doc=(
        "rest the primary while its rounds take longer (1 s, doubling to 10 s, then one trial "
        "round)"), source="a fifth of the shim's 50 ms timeout, so a round plus queueing stays "
                          "inside it")
    batch_window_s: float = setting(0.0, unit="s", development=True, doc=(
        "after a request arrives, wait this long for more to solve in the same round (0: take "
        "what is queued); `--batch-window`"))
    max_batch: int = setting(256, unit="requests", doc=(
        "most requests solved in one round"))
    plan_ahead: bool = setting(True, unit="true/false", doc=(
        "a background planner keeps per request class a queue of OST lists planned by the "
        "flow, handed out after an O(stripe count) health check; `--no-plan-ahead` solves "
        "every request in a round"), source='docs/placement.md, "Planning ahead"')
    plan_process: bool = setting(True, unit="true/false", development=True, doc=(
        "the planner solves its flows in a child process at nice +10, never under the request "
        "loop's interpreter lock; `--no-plan-process` keeps them in its thread (debugging)"))
    state_file: str = setting("", unit="path", doc=(
        "the learned state (the predictor's applications, each OST's speed estimate): "
        "restored at start, saved every `save_interval_s` and on SIGTERM by a writer thread "
        "(fsync, rename); a malformed record is skipped and counted"), shown="none")
    save_interval_s: float = setting(300.0, unit="s", doc=(
        "seconds between periodic saves of `state_file`"))
    metrics_port: int = setting(0, unit="TCP port", doc=(
        "Prometheus `/metrics` (0: off)"), shown="0 (off)")
    metrics_addr: str = setting("0.0.0.0", unit="address", doc="the address `/metrics` binds")
    lnet_capacity_bytes_per_s: float = setting(12.5e9, unit="B/s", doc=(
        "LNet send+recv rate that counts as 100 % load"), source="one 100 Gb/s link")
    pools: dict[str, Any] = setting(factory=dict, unit="name -> OST indices", doc=(
        "`[mapper.pools] name = [OST indices]`: used only until the MDS collector's first "
        "sample, whose `lod.*.pools.*` replace them"), shown="none")
    fsnames: list[str] = setting(factory=list, unit="fsnames", doc=(
        "file systems served (`--fsname`, repeatable); state is keyed by (fsname, OST "
        "index); a request naming another gets ENODEV, one naming none EINVAL when several "
        "are served; empty: the first sampled"), shown="[] (the first sampled)")
    curve_secret_key: str = setting("", unit="path", doc=(
        "CURVE key to subscribe to a CURVE broker (with `curve_server_key`)"), shown="none")
    curve_server_key: str = setting("", unit="path", doc=(
        "the broker's public key"), shown="none")
    serve_curve_secret_key: str = setting("", unit="path", doc=(
        "make the request socket a CURVE server (with `serve_curve_authorized_keys`; the "
        "embedded broker uses the same keys)"), shown="none")
    serve_curve_authorized_keys: str = setting("", unit="directory", doc=(
        "the clients' public `.key` files allowed to connect"), shown="none")
    peer_requests_per_s: float = setting(10000.0, unit="requests/s", doc=(
        "request rate per client (its CURVE key, else its IP address); over it: EBUSY and the "
        "shim uses Lustre's allocator (0: no limit); a client may send "
        "`PEER_BURST_S` (2) seconds of it at once"), source=(
        "at 2000/s, 16 threads creating 1000 files each on one node sent 4,826 of 16,000 "
        "creates to the fallback, so the default only stops floods"))
    peer_batch_max: int = setting(64, unit="requests", doc=(
        "requests of one client solved in one round; the rest of a burst: EBUSY"),
        source="a shim has one request in flight per thread: 64 is a 64-core node creating "
               "from every core")
    peer_new_apps_per_min: int = setting(60, unit="job ids/min", doc=(
        "new job ids a client may introduce per minute; past it its requests are still placed "
        "but learned under one overflow id"))
    peer_max_apps: int = setting(512, unit="job ids", doc=(
        "job ids one client owns at once, so one client never evicts more than this of the "
        "other jobs' learned state (LRU of 4,096)"))
    require_curve: bool = setting(False, unit="true/false", doc=(
        "refuse to start unless the request socket and the state feed use CURVE; the "
        "packaged `mapper.toml` sets it; `--insecure` clears it (demos only)"))
    insecure: bool = setting(False, unit="true/false", doc=(
        "serve without CURVE on an address other hosts reach, knowingly (`--insecure`); "
        "without it a request socket without CURVE binds only a loopback, `ipc://` or "
        "`inproc://` address"))
    log_level: str = setting("info", unit="level", doc=(
        "`debug`, `info`, `warning`, `error`"))
    decision_log_per_s: float = setting(1.0, unit="lines/s", doc=(
        "most `event=decision` log lines a second, sampled from the replies (0: off)"))
    control_endpoint: str = setting("auto", unit="endpoint", doc=(
        "the admin socket `lustre-alloc-ctl` and the migration service talk to: `ipc://PATH` "
        "or a loopback `tcp://`; `auto`: `ipc://$RUNTIME_DIRECTORY/control` under systemd, "
        "else the hand-started mapper's; `\"\"`: off"))
    layout_lease_s: float = setting(2.0, unit="s", doc=(
        "lifetime of a layout lease (protocol v2, docs/protocol.md), at most the primary's "
        "`plan_ttl_s`; a lease nobody returned is un-booked after it, so a crashed client "
        "holds capacity for one lifetime at most"),
        source="docs/protocol.md, \"Protocol v2: leases\"")
    lease_max_layouts: int = setting(256, unit="layouts", development=True, doc=(
        "most layouts in one lease (tests lower it to reach the cap)"),
        source="the shim asks for at most LA_LEASE_ASK_MAX = 256 (la_internal.h), so a "
               "larger cap changes nothing")
    lease_peer_quota: int = setting(4096, unit="layouts", doc=(
        "most leased layouts one client holds at once; past it a lease request gets EDQUOT "
        "and that class's creates go to Lustre's allocator for `LUSTRE_ALLOC_RETRY_MS`"))
    policy_params: dict[str, Any] = field(default_factory=dict)
    steer: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> "MapperConfig":
        if self.static_cluster and not _STATIC.match(self.static_cluster):
            raise ConfigError(f"static_cluster {self.static_cluster!r} is not <OSSes>x<OSTs>, "
                              f"e.g. 4x2")
        if self.static_cluster:
            osses, per = self.static_shape()
            if osses < 1 or per < 1 or osses * per > 65_536:
                raise ConfigError(f"static_cluster {self.static_cluster!r}: need 1..65536 OSTs")
        if not 0 < self.mds_cpu_limit_percent <= 100:
            raise ConfigError("mds_cpu_limit_percent must be in (0, 100]")
        for name in ("stale_after_s", "round_budget_s", "batch_window_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0")
        if self.batch_window_s > 0.1:
            raise ConfigError("batch_window_s above 0.1 s would stall every create")
        if not 0 < self.layout_lease_s <= 60:
            raise ConfigError("layout_lease_s must be in (0, 60]")
        if not 1 <= self.lease_max_layouts <= 4096 or self.lease_peer_quota < 1:
            raise ConfigError("lease_max_layouts must be 1..4096 and lease_peer_quota >= 1")
        if self.decision_log_per_s < 0:
            raise ConfigError("decision_log_per_s must be >= 0")
        ce = self.control_endpoint
        if ce not in ("", "auto") and not (ce.startswith("ipc://") or any(
                ce.startswith(f"tcp://{h}:") for h in ("127.0.0.1", "[::1]", "localhost"))):
            raise ConfigError(f"control_endpoint {ce!r}: the admin socket is ipc:// or a "
                              f"loopback tcp:// (it answers explain and reload to anyone who "
                              f"connects)")
        if self.max_batch < 1:
            raise ConfigError("max_batch must be >= 1")
        if self.save_interval_s <= 0:
            raise ConfigError("save_interval_s must be > 0")
        if not 0 <= self.metrics_port <= 65_535:
            raise ConfigError("metrics_port must be 0..65535")
        if self.lnet_capacity_bytes_per_s <= 0:
            raise ConfigError("lnet_capacity_bytes_per_s must be > 0")
        if bool(self.curve_secret_key) != bool(self.curve_server_key):
            raise ConfigError("curve_secret_key and curve_server_key go together")
        if bool(self.serve_curve_secret_key) != bool(self.serve_curve_authorized_keys):
            raise ConfigError("serve_curve_secret_key and serve_curve_authorized_keys go together")
        if self.peer_requests_per_s < 0:
            raise ConfigError("peer_requests_per_s must be >= 0")
        if self.peer_batch_max < 1:
            raise ConfigError("peer_batch_max must be >= 1")
        if self.peer_new_apps_per_min < 0 or self.peer_max_apps < 0:
            raise ConfigError("peer_new_apps_per_min and peer_max_apps must be >= 0")
        if self.require_curve and not self.static_cluster:
            missing = [n for n in ("serve_curve_secret_key", "serve_curve_authorized_keys")
                       if not getattr(self, n)]
            if not self.embed_broker:
                missing += [n for n in ("curve_secret_key", "curve_server_key")
                            if not getattr(self, n)]
            if missing:
                raise ConfigError(f"require_curve is set but {', '.join(missing)} "
                                  f"{'is' if len(missing) == 1 else 'are'} empty: give the key "
                                  f"files (lustre-alloc-broker --keygen), or pass --insecure "
                                  f"to serve without CURVE (demos only)")
        elif self.require_curve and not self.serve_curve_secret_key:
            raise ConfigError("require_curve is set but serve_curve_secret_key and "
                              "serve_curve_authorized_keys are empty (or pass --insecure)")
        from lustre_alloc.common.fsname import valid_fsname
        if len(set(self.fsnames)) != len(self.fsnames):
            raise ConfigError(f"fsnames {self.fsnames} lists a file system twice")
        for fs in self.fsnames:
            if not isinstance(fs, str) or not valid_fsname(fs):
                raise ConfigError(f"fsnames: {fs!r} is not a Lustre fsname (1..8 of A-Za-z0-9_)")
        for name, members in self.pools.items():
            if not isinstance(members, list) or not all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in members):
                raise ConfigError(f"pools.{name} must be a list of OST indices")
            if not name or len(name.encode()) > 15:
                raise ConfigError(f"pool name {name!r} must be 1..15 bytes (LOV_MAXPOOLNAME)")
        for name, params in self.policy_params.items():
            _check_policy_table(name, params)
        if "qos_steer" in (self.policy, self.fallback):
            raise ConfigError("qos_steer is the simulator's row for steering: live, Lustre's "
                              "allocator places and the [steer] table acts on it "
                              "(docs/operations.md)")
        self.steer_config()         # ConfigError naming the steer key
        self.scope_rules()          # ConfigError naming the scope key
        return self

    def control_address(self) -> str:
        """The control socket's endpoint ("" when off; ``control_endpoint``): ``auto`` is
        ``ipc://$RUNTIME_DIRECTORY/control`` under systemd, else the hand-started mapper's
        (:func:`lustre_alloc.common.runtime_dir.hand_started_control`)."""
        if self.control_endpoint != "auto":
            return self.control_endpoint
        runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
        if runtime:
            return f"ipc://{runtime}/control"
        return f"ipc://{hand_started_control()}"       # started by hand: ctl finds it too

    def scope_rules(self) -> "Scope":
        """The ``[scope]`` rules.

        Raises:
            ConfigError: one line naming ``scope.<key>``.
        """
        from lustre_alloc.mapper.service.scope import Scope
        return Scope.from_table(self.scope)

    def steer_config(self) -> "SteerConfig":
        """The ``[steer]`` settings.

        Raises:
            ConfigError: one line naming ``steer.<key>``.
        """
        from lustre_alloc.mapper.steer.agents import SteerConfig
        return SteerConfig.from_table(self.steer)

    def check_exposure(self) -> None:
        """Refuse to serve without CURVE on an address other hosts reach, unless
        ``insecure`` (checked when the service binds).

        Raises:
            ConfigError: no ``serve_curve_*`` keys, ``bind`` not local, ``insecure`` unset.
        """
        if not self.serve_curve_secret_key and not self.insecure and not local_endpoint(self.bind):
            raise ConfigError(f"refusing to serve {self.bind} without CURVE: any host that "
                              f"reaches it could steer allocations; give serve_curve_secret_key "
                              f"and serve_curve_authorized_keys, bind 127.0.0.1, or pass "
                              f"--insecure")

    def static_shape(self) -> tuple[int, int]:
        """(OSSes, OSTs per OSS) of ``static_cluster``."""
        m = _STATIC.match(self.static_cluster)
        if m is None:
            raise ConfigError(f"static_cluster {self.static_cluster!r} is not <OSSes>x<OSTs>, "
                              f"e.g. 4x2")
        return int(m.group(1)), int(m.group(2))

    def curve(self) -> CurveClient | None:
        """Keys to subscribe to a CURVE broker, or None."""
        if not self.curve_secret_key:
            return None
        return CurveClient(self.curve_secret_key, self.curve_server_key)

    def serve_curve(self) -> CurveServer | None:
        """Keys that make the request socket a CURVE server, or None."""
        if not self.serve_curve_secret_key:
            return None
        return CurveServer(self.serve_curve_secret_key, self.serve_curve_authorized_keys)


def _check_policy_table(name: str, params: Any) -> None:
    """One ``[policy.<name>]`` table: a known policy, known keys, values it accepts.

    Raises:
        ConfigError: one line naming ``policy.<name>[.<key>]``.
    """
    if name not in registry.POLICIES:
        raise ConfigError(f"policy.{name}: unknown policy; known: "
                          f"{', '.join(sorted(registry.POLICIES))}")
    if not isinstance(params, dict):
        raise ConfigError(f"policy.{name} must be a table")
    for key in params:
        if key in registry.GATE_PARAMS:
            raise ConfigError(f"policy.{name}.{key}: set it as mapper.{key}")
    try:
        kwargs, experimental = registry.policy_kwargs(name, params)
        registry.check_policy_params(name, kwargs)
        registry.make_policy(name, **kwargs)     # the policy's own value checks
    except (registry.PolicyParamError, TypeError, ValueError) as exc:
        msg = str(exc)
        raise ConfigError(msg if msg.startswith("policy.") else f"policy.{name}: {msg}") from None
    for key in experimental:
        log.warning("policy.%s.experimental.%s is set: an experiment, not a tuned setting "
                    "(docs/operations.md, \"Tuning the policy\")", name, key,
                    extra={"event": "experimental_setting", "policy": name, "key": key})


def _top_tables(path: str | None) -> dict[str, Any]:
    """The top-level tables of ``path`` (empty when absent or unreadable:
    :func:`lustre_alloc.common.config.load` reports an unreadable file)."""
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _policy_tables(path: str | None) -> dict[str, Any] | None:
    """The top-level ``[policy]`` table of ``path`` (None when absent)."""
    data = _top_tables(path)
    mapper = data.get("mapper")
    if isinstance(mapper, dict) and "policy_params" in mapper:
        raise ConfigError(f"{path}: mapper.policy_params: write [policy.<name>] tables instead")
    tables = data.get("policy")
    if tables is None:
        return None
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: policy must be tables [policy.<name>]")
    return tables


def load_config(path: str | None, overrides: Mapping[str, Any]) -> MapperConfig:
    """``[mapper]`` of ``path`` (if given), then ``overrides`` (None values ignored); the
    top-level ``[policy.<name>]`` tables of ``path`` become ``policy_params``.

    Raises:
        ConfigError: unreadable file, unknown key, wrong type, invalid value (one line
            naming the key, e.g. ``policy.mcmf.predict_kk: unknown parameter ...``).
    """
    top = _top_tables(path)
    unknown = sorted(set(top) - set(TOP_TABLES))
    if unknown:
        # a misspelled [scope] must not turn a shadow pilot into live placement
        raise ConfigError(f"{path}: unknown table or key [{unknown[0]}]; a mapper "
                          f"configuration has {', '.join(f'[{t}]' for t in TOP_TABLES)} "
                          f"(and [policy.<name>])")
    tables = _policy_tables(path)
    flags = {k: v for k, v in overrides.items() if v is not None}
    for name in ("steer", "scope"):
        table = top.get(name)
        if table is not None and not isinstance(table, dict):
            raise ConfigError(f"{path}: {name} must be a table [{name}]")
    for section, old, new in RENAMED:
        table = top.get(section)
        if isinstance(table, dict) and old in table:
            raise ConfigError(f"{path}: {section}.{old} is now {section}.{new} (one name, one "
                              f"meaning)")
    for (section, key), why in REMOVED.items():
        table = top.get(section)
        if isinstance(table, dict) and key in table:
            raise ConfigError(f"{path}: {section}.{key} was removed: {why}")
    development = _development_table(path, top)
    steer = {**top.get("steer", {}), **development.pop("steer", {})}
    files = {**development, **({"policy_params": tables} if tables is not None else {}),
             **({"steer": steer} if steer else {}),
             **({"scope": top["scope"]} if "scope" in top else {})}
    return load(MapperConfig, path, "mapper", {**files, **flags})


def _development_table(path: str | None, top: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[development]`` table of ``path``: the development switches of ``[mapper]``
    (:func:`~lustre_alloc.common.settings.setting` with ``development=True``) and, under
    ``[development.steer]``, of ``[steer]``. A development switch in ``[mapper]`` or
    ``[steer]`` is refused, so the admin's tables hold only admin settings.

    Raises:
        ConfigError: one line naming the misplaced or unknown key.
    """
    from lustre_alloc.mapper.steer.controller import SteerParams
    mapper_dev = {f.name for f, _ in settings_of(MapperConfig, development=True)}
    from lustre_alloc.mapper.steer.agents import SteerConfig
    steer_dev = {f.name for cls in (SteerParams, SteerConfig)
                 for f, _ in settings_of(cls, development=True)}
    for section, names in (("mapper", mapper_dev), ("steer", steer_dev)):
        table = top.get(section)
        for key in (table if isinstance(table, dict) else ()):
            if key in names:
                where = "[development]" if section == "mapper" else "[development.steer]"
                raise ConfigError(f"{path}: {section}.{key} is a development switch: set it "
                                  f"in {where} (or by its flag)")
    table = top.get("development", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: development must be a table [development]")
    table = dict(table)
    steer = table.get("steer", {})
    if not isinstance(steer, dict):
        raise ConfigError(f"{path}: development.steer must be a table")
    for key in table:
        if key != "steer" and key not in mapper_dev:
            raise ConfigError(f"{path}: development.{key}: unknown development switch; known: "
                              f"{', '.join(sorted(mapper_dev))} and [development.steer] "
                              f"{', '.join(sorted(steer_dev))}")
    for key in steer:
        if key not in steer_dev:
            raise ConfigError(f"{path}: development.steer.{key}: unknown development switch; "
                              f"known: {', '.join(sorted(steer_dev))}")
    return table
