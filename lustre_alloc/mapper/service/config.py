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
from lustre_alloc.mapper.policies import registry
from lustre_alloc.mapper.policies.gate import MDS_CPU_LIMIT_PERCENT

log = logging.getLogger("lustre_alloc.mapper.service.config")

if TYPE_CHECKING:
    from lustre_alloc.mapper.service.scope import Scope
    from lustre_alloc.mapper.steer.agents import SteerConfig

TOP_TABLES = ("mapper", "policy", "steer", "scope")
"""The top-level tables of a mapper configuration; any other name is refused."""
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
    """Settings of ``lustre-alloc-mapper``.

    Attributes:
        bind: ROUTER endpoint serving allocation requests (docs/protocol.md, port 5558).
        broker_backend, broker_snapshot: the broker's XPUB and snapshot endpoints to
            subscribe to (ignored with ``embed_broker`` or ``static_cluster``).
        embed_broker: run the broker inside the mapper process, bound on
            ``broker_frontend``/``broker_backend_bind``/``broker_snapshot_bind``.
        broker_frontend, broker_backend_bind, broker_snapshot_bind: the embedded broker's
            bind endpoints.
        static_cluster: ``"<OSSes>x<OSTs per OSS>"``: an emulated uniform cluster that
            never goes stale, no broker (tests, shim development); ``""`` = off.
        static_kbytes_total: size of each emulated OST, KiB.
        policy: primary placement policy (a name in ``lustre_alloc.mapper.policies.registry.POLICIES``).
        fallback: the policy used when the gate says no (Lustre's allocator).
        seed: policies' random seed.
        mds_cpu_limit_percent: fall back while MDS CPU >= this (Section III-D: 70).
        stale_after_s: a server whose last sample is older is stale; 0 = 2 x the
            collectors' interval.
        round_budget_s: fall back while the primary's estimated round time exceeds it, s.
        batch_window_s: after a request arrives, wait this long for more to solve in the
            same round (0: take only what is already queued).
        max_batch: most requests in one round.
        plan_ahead: a background thread keeps the primary's plan queues full (a primary
            that plans ahead: mcmf); requests are answered from them in O(stripe count)
            (:mod:`lustre_alloc.mapper.service.background_planner`). False: every request is solved in a round.
        plan_process: the planner solves its flows in a child process
            (:mod:`lustre_alloc.mapper.service.plan_worker`), so they never hold the request loop's
            interpreter lock. False: in the planner thread (one process, for debugging).
        state_file: where the primary's learned state is saved (``""``: not saved).
        save_interval_s: seconds between periodic saves (also saved on SIGTERM).
        metrics_port: Prometheus HTTP port (0: off); ``metrics_addr`` its address.
        lnet_capacity_bytes_per_s: link rate that means 100 % LNet load, B/s.
        pools: pool name -> OST indices (of the first file system; ``lod`` samples of the MDS
            collector replace them when they arrive).
        fsnames: file systems this mapper serves (state keyed by (fsname, OST index), one
            learned state each); a request naming another is refused (ENODEV). Empty: one
            file system, the fsname of the first OST sample (``static`` for a static cluster).
        policy_params: policy name -> constructor parameters, from the top-level
            ``[policy.<name>]`` tables (:func:`lustre_alloc.mapper.policies.registry.build_policy`).
        curve_secret_key, curve_server_key: CURVE keys to subscribe to the broker.
        serve_curve_secret_key, serve_curve_authorized_keys: make the request socket a
            CURVE server (clients need an authorised key); both or neither.
        peer_requests_per_s, peer_request_burst: request rate allowed per client (CURVE key,
            else IP address); over it the reply is EBUSY (0: no limit). See
            :mod:`lustre_alloc.mapper.service.limits`.
        peer_batch_max: requests of one client solved in one round; the rest of a pipelined
            burst is answered EBUSY at once (a shim has one request in flight per thread, so
            64 is a 64-core node creating files from every core at once).
        peer_new_apps_per_min, peer_max_apps: new applications (job ids the predictor does
            not track) a client may introduce per minute, and own at once; past them its jobs
            are learned under one shared per-client id.
        require_curve: refuse to start unless the request socket (``serve_curve_*``) and the
            state feed (``curve_*``, or the embedded broker) use CURVE; the packaged
            configuration sets it; ``--insecure`` clears it for demos.
        insecure: serve without CURVE on an address other hosts reach, knowingly
            (``--insecure``). Without it, a request socket without CURVE may bind only a
            loopback, ``ipc://`` or ``inproc://`` address: anyone who reaches it steers
            allocations.
        log_level: ``debug``, ``info``, ``warning`` ...
        steer: the top-level ``[steer]`` table: steering Lustre's own allocator
            (:class:`lustre_alloc.mapper.steer.agents.SteerConfig`; off unless ``mode`` says otherwise).
        decision_log_per_s: most ``event=decision`` log lines a second, sampled from the
            replies (:mod:`lustre_alloc.mapper.service.decision_desk`; 0: off).
        control_endpoint: the admin socket ``lustre-alloc-ctl`` talks to
            (:mod:`lustre_alloc.mapper.service.admin_socket`): ``ipc://PATH`` or a loopback ``tcp://``;
            ``"auto"``: ``ipc://$RUNTIME_DIRECTORY/control`` when systemd gives a runtime
            directory (the unit's ``RuntimeDirectory=lustre-alloc``), else off; ``""``: off.
        lease_s: lifetime of a layout lease (protocol v2, :mod:`lustre_alloc.mapper.service.leases`),
            s; a lease nobody returned is un-booked after it. Bounded by the primary's own
            ``plan_ttl_s`` when it plans ahead (a leased list is as old as a plan at most).
        lease_max_layouts: most layouts in one lease.
        lease_peer_quota: most leased layouts one client holds at once; past it a lease
            request gets EDQUOT and the client asks per create.
        scope: the top-level ``[scope]`` table: which requests are placed
            (:class:`lustre_alloc.mapper.service.scope.Scope`; everything when absent).
    """
    bind: str = "tcp://*:5558"
    broker_backend: str = "tcp://127.0.0.1:5556"
    broker_snapshot: str = "tcp://127.0.0.1:5557"
    embed_broker: bool = False
    broker_frontend: str = "tcp://*:5555"
    broker_backend_bind: str = "tcp://*:5556"
    broker_snapshot_bind: str = "tcp://*:5557"
    static_cluster: str = ""
    static_kbytes_total: int = 1 << 32
    policy: str = DEFAULT_POLICY
    fallback: str = DEFAULT_FALLBACK
    seed: int = 0
    mds_cpu_limit_percent: float = MDS_CPU_LIMIT_PERCENT
    stale_after_s: float = 0.0
    round_budget_s: float = 0.010
    batch_window_s: float = 0.0
    max_batch: int = 256
    plan_ahead: bool = True
    plan_process: bool = True
    state_file: str = ""
    save_interval_s: float = 300.0
    metrics_port: int = 0
    metrics_addr: str = "0.0.0.0"
    lnet_capacity_bytes_per_s: float = 12.5e9
    pools: dict[str, Any] = field(default_factory=dict)
    fsnames: list[str] = field(default_factory=list)
    policy_params: dict[str, Any] = field(default_factory=dict)
    curve_secret_key: str = ""
    curve_server_key: str = ""
    serve_curve_secret_key: str = ""
    serve_curve_authorized_keys: str = ""
    peer_requests_per_s: float = 10000.0
    peer_request_burst: int = 20000
    peer_batch_max: int = 64
    peer_new_apps_per_min: int = 60
    peer_max_apps: int = 512
    require_curve: bool = False
    insecure: bool = False
    log_level: str = "info"
    decision_log_per_s: float = 1.0
    control_endpoint: str = "auto"
    lease_s: float = 2.0
    lease_max_layouts: int = 256
    lease_peer_quota: int = 4096
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
        if not 0 < self.lease_s <= 60:
            raise ConfigError("lease_s must be in (0, 60]")
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
        if self.peer_requests_per_s < 0 or self.peer_request_burst < 1:
            raise ConfigError("peer_requests_per_s must be >= 0 and peer_request_burst >= 1")
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
    if tables is not None:
        overrides = {**overrides, "policy_params": tables}
    for name in ("steer", "scope"):
        table = top.get(name)
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError(f"{path}: {name} must be a table [{name}]")
            overrides = {**overrides, name: table}
    return load(MapperConfig, path, "mapper", overrides)
