"""Simulator scenarios: TOML files describing the cluster, its initial fill, the
workloads, the policies and the duration.

Example (``lustre_alloc/simulator/scenarios/paper-32ost.toml`` is the full one)::

    name = "paper-32ost"
    duration_s = 86400
    seed = 2017
    policies = ["round_robin", "lustre_qos", "random"]

    [cluster]
    oss_count = 8
    osts_per_oss = 4
    ost_size_gib = 8192
    ost_bandwidth_mib_s = 800

    [cluster.initial_fill]
    mode = "explicit"            # explicit | generated | lfs_df
    used_fraction = [0.9, 0.02, ...]

    [[workload]]
    generator = "ior"            # or: trace = "file.csv" | darshan = "log.darshan"
    seed = 1

Data files: ``pkg:<package>/<path>`` names a file shipped inside an installed package (the
bundled scenarios use ``pkg:lustre_alloc_data/nersc-pytokio/...``, found with
``importlib.resources``, so they work from a wheel); any other path is absolute or relative to
the scenario file. Any inconsistency raises :class:`ScenarioError` with a one-line message
naming the file and key.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lustre_alloc_data import DataFileError, is_package_reference, resource_path
from lustre_alloc.mapper.policies.registry import (GATE_PARAMS, POLICIES, SIMULATION_ONLY, PolicyParamError,
                                      policy_kwargs, policy_param_names)
from lustre_alloc.simulator.models import MdsModel, OssModel
from lustre_alloc.simulator.targets import TargetValueError, TargetValues, parse_target_values

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
FILL_MODES = ("explicit", "generated", "lfs_df")
SIZE_HINTS = ("none", "per_file", "final", "at_close")
"""What a workload's creates announce of a file's size (:attr:`WorkloadSpec.size_hint`)."""


class ScenarioError(ValueError):
    """An invalid scenario. ``str()`` is one line: ``file: key: reason``."""


@dataclass(frozen=True)
class InitialFill:
    """How full each OST is at t=0.

    ``explicit``: ``used_fraction`` per OST. ``generated``: ``hot_osts`` OSTs (chosen
    by seed) at ``hot_fraction``, the rest uniform in ``cold_fraction`` [lo, hi].
    ``lfs_df``: a real ``lfs df`` snapshot (``path``, ``filesystem``, ``snapshot``
    index) sets OST count, sizes and used space; ``ost_map`` optionally gives the real
    OST -> OSS mapping (``lctl dl -t`` output).

    ``files_gib``: the initial used space of each OST as stripe-count-1 files of this size
    (the last one smaller), so migrations can move it (:mod:`lustre_alloc.simulator.rebalance.plan_event`); they
    are never written, read or purged (their ages are unknown). None: the used space is
    only a number.
    """
    mode: str
    used_fraction: tuple[float, ...] = ()
    hot_osts: int = 0
    hot_fraction: float = 0.0
    cold_fraction: tuple[float, float] = (0.0, 0.0)
    path: Path | None = None
    filesystem: str | None = None
    snapshot: int = 0
    ost_map: Path | None = None
    files_gib: float | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """The simulated servers. Sizes in GiB, bandwidths in MiB/s, latency in ms.

    The per-target keys (:mod:`lustre_alloc.simulator.targets`: a number, a per-target list, a seeded
    distribution, or ``derived = "lmt:<file>"``): ``ost_bandwidth_mib_s`` (write),
    ``ost_read_bandwidth_mib_s`` (default: the write values), ``ost_latency_ms``
    (per-request service latency, default 0), ``oss_nic_mib_s`` (NIC/LNet limit per OSS,
    default none) and ``oss_cpu_mib_s`` (throughput at which the OSS CPU saturates,
    default none). A defaulted key is None. ``osd`` is the OSTs' OSD, which decides what
    their collectors read (:mod:`lustre_alloc.simulator.ost_readings`): ``ldiskfs`` (default)
    times each write RPC in brw_stats; ``zfs`` times no write there, its OFD ``stats`` do
    (docs/reference/lustre-configurations.md).
    """
    oss_count: int
    osts_per_oss: int
    ost_size_gib: float
    ost_bandwidth_mib_s: TargetValues
    initial_fill: InitialFill
    statfs_interval_s: float = 5.0
    stats_interval_s: float = 5.0
    ost_read_bandwidth_mib_s: TargetValues | None = None
    ost_latency_ms: TargetValues | None = None
    oss_nic_mib_s: TargetValues | None = None
    oss_cpu_mib_s: TargetValues | None = None
    osd: str = "ldiskfs"


OSDS = ("ldiskfs", "zfs")
"""The OSDs a simulated cluster's OSTs may run (``[cluster] osd``)."""


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: a trace file, a generator, or a Darshan log.

    Attributes:
        kind: ``trace`` | ``generator`` | ``darshan``.
        source: the path, generator name, or log path/name.
        seed: generator seed.
        jobid: override of the jobid (generators).
        params: generator parameters.
        repeat_every_s: replay the workload every this many seconds (Darshan logs are
            short; a repeat gets a fresh job id suffix ``#k`` and file namespace).
        start_s: time offset of the first replay.
        managed: fraction of the workload's jobs whose creates go through the mapper
            (``true`` = 1, ``false`` = 0); the others are placed by Lustre's own
            allocator (``[unmanaged] allocator``), as for applications that do not preload
            the shim. Which jobs: a seeded hash of the job id (:func:`lustre_alloc.simulator.workload.is_managed`).
        reads_after_s: kind ``reads`` only: each file of workload ``source`` is read back
            whole this many seconds after its last write (``reads_fraction`` of them).
        size_hint: what the workload's creates tell the mapper of a file's size, as the
            shim would send it (docs/client.md): ``"none"`` (default: ``expected_bytes``
            0, the shim's default), ``"per_file"`` (the application passes each file's
            size through the explicit API: the bytes of the record that creates it), or a
            number of bytes (``LUSTRE_ALLOC_EXPECTED_BYTES`` set for the whole process), or
            ``"final"``: each file's size once all its writes are done
            (:func:`lustre_alloc.simulator.file_sizes.final_sizes`), a reference no real create can give
            (the ceiling of what knowing sizes buys), or ``"at_close"``: nothing at create,
            and each file's size reported when its writes have landed, as the shim does with
            ``LUSTRE_ALLOC_SIZES=1`` (to a policy that learns sizes).
    """
    kind: str
    source: str
    seed: int = 0
    jobid: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    repeat_every_s: float | None = None
    start_s: float = 0.0
    managed: float = 1.0
    reads_after_s: float = 0.0
    reads_fraction: float = 1.0
    size_hint: str | int = "none"


@dataclass(frozen=True)
class PurgeSpec:
    """Purge policy: every ``interval_s``, delete files not written for ``age_s``
    when the file system is more than ``when_used_above`` full (OLCF-style purge,
    Section II-B)."""
    enabled: bool = False
    interval_s: float = 3600.0
    age_s: float = 43200.0
    when_used_above: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """A parsed, validated scenario."""
    name: str
    path: Path
    description: str
    duration_s: float
    step_s: float
    seed: int
    policies: tuple[str, ...]
    policy_params: dict[str, dict[str, Any]]
    cluster: ClusterSpec
    workloads: tuple[WorkloadSpec, ...]
    oss_model: OssModel
    mds_model: MdsModel
    purge: PurgeSpec
    network: str = "none"
    network_params: dict[str, float] = field(default_factory=dict)
    events: tuple = ()
    unmanaged_allocator: str = "lustre_qos"
    rebalance: tuple = ()
    pfl: tuple[tuple[int, int], ...] = ()
    """``[layout] pfl``: the file system's composite (PFL) default, (end bytes, stripe
    count) per component in extent order, the last ending at ``LUSTRE_EOF``; every file
    gets it (the trace's stripe count is not used, its stripe size is). Empty: plain
    layouts as the trace asks."""

    def with_seed_offset(self, k: int) -> "Scenario":
        """The scenario under seed ``seed + k``: the cluster's distribution draws, the
        policies' randomness and every workload's jitter (its seed + ``k``) change; ``k``
        0 is the scenario itself."""
        if k == 0:
            return self
        from dataclasses import replace
        return replace(self, seed=self.seed + k,
                       workloads=tuple(replace(w, seed=w.seed + k) for w in self.workloads))

    def with_overrides(self, *, policies: tuple[str, ...] | None = None,
                       duration_s: float | None = None) -> "Scenario":
        """A copy with other policies and/or duration (CLI flags)."""
        from dataclasses import replace
        kw: dict[str, Any] = {}
        if policies is not None:
            _check_policies(self.path, policies)
            kw["policies"] = tuple(policies)
        if duration_s is not None:
            if duration_s <= 0:
                raise ScenarioError(f"{self.path}: duration_s: must be > 0, got {duration_s}")
            kw["duration_s"] = float(duration_s)
            # A shorter run simply does not reach the later events.
            kw["events"] = tuple(e for e in self.events if e.at_s < duration_s)
        return replace(self, **kw)


def _check_policies(path: Path, policies: tuple[str, ...] | list[str]) -> None:
    if not policies:
        raise ScenarioError(f"{path}: policies: empty")
    known = set(POLICIES) | set(SIMULATION_ONLY)
    from lustre_alloc.simulator.leasing import LEASE_SUFFIX, leased
    for p in policies:
        own, behind_leases = leased(p)
        if behind_leases and own in POLICIES:
            continue                    # the policy behind the shim's leases
        if p not in known:
            raise ScenarioError(f"{path}: policies: unknown policy {p!r} "
                                f"(known: {', '.join(sorted(known))}; any but the "
                                f"simulation-only ones with {LEASE_SUFFIX!r})")


def resolve_scenario_path(name_or_path: str) -> Path:
    """A scenario file by path, or by bundled name (``paper-32ost``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = SCENARIO_DIR / f"{name_or_path}.toml"
    if bundled.is_file():
        return bundled
    names = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.toml")))
    raise ScenarioError(f"{name_or_path}: no such scenario file or bundled scenario (bundled: {names})")


def _expand(path: Path, raw: str) -> Path:
    """A data file named in scenario ``path``: ``pkg:`` reference, absolute, or scenario-relative.

    A ``pkg:`` reference to a missing file returns the path it would have (the caller reports
    "file not found" with the key), so every missing-file error has the same one-line form.
    """
    if is_package_reference(raw):
        try:
            return resource_path(raw)
        except DataFileError:
            return Path(raw)
    p = Path(raw)
    return p if p.is_absolute() else (path.parent / p)


class _Table:
    """Typed access to one TOML table with file/key context in errors."""

    def __init__(self, path: Path, prefix: str, data: dict[str, Any]):
        self.path, self.prefix, self.data = path, prefix, data
        self.used: set[str] = set()

    def err(self, key: str, reason: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {self.prefix}{key}: {reason}")

    def get(self, key: str, kind: type | tuple, default: Any = ..., *, minimum: float | None = None,
            maximum: float | None = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise self.err(key, "missing")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            raise self.err(key, f"expected {'/'.join(k.__name__ for k in kinds)}, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.err(key, f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.err(key, f"must be <= {maximum}, got {value}")
        return value

    def table(self, key: str) -> "_Table":
        self.used.add(key)
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.err(key, "expected a table")
        return _Table(self.path, f"{self.prefix}{key}.", value)

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.err(unknown[0], "unknown key")


def _model(table: _Table, cls: type) -> Any:
    """Build a model dataclass from a table of floats; unknown keys are errors."""
    known = set(cls.__dataclass_fields__)
    for key in table.data:
        if key not in known:
            raise table.err(key, f"unknown key (known: {', '.join(sorted(known))})")
    return cls(**{k: table.get(k, float, minimum=0.0) for k in table.data})


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Parse and validate a scenario file (or bundled scenario name).

    Checks everything that can be checked before a run: types and ranges, unknown
    keys, policy names, referenced files exist, explicit fill length matches the OST
    count, stripe counts and OST ids in trace files fit the cluster (via
    :func:`lustre_alloc.simulator.workload.check_workloads`).

    Raises:
        ScenarioError: one line naming the file, key and reason.
    """
    path = resolve_scenario_path(str(name_or_path))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    top = _Table(path, "", data)
    name = top.get("name", str, path.stem)
    description = top.get("description", str, "")
    duration_s = top.get("duration_s", float, minimum=1.0)
    step_s = top.get("step_s", float, 1.0, minimum=0.001)
    seed = top.get("seed", int, 0)
    policies = tuple(top.get("policies", list, ["round_robin", "lustre_qos", "random"]))
    _check_policies(path, policies)
    policy_params = _policy_params(top.table("policy_params"))
    cluster = _cluster(top.table("cluster"))
    oss_model = _model(top.table("oss_model"), OssModel)
    mds_model = _model(top.table("mds_model"), MdsModel)
    purge = _purge(top.table("purge"))
    network, network_params = _network(top.table("network"))

    from lustre_alloc.simulator.events import EventError, parse_events
    top.used.add("event")
    try:
        events = parse_events(path, data.get("event"), duration_s)
    except EventError as e:
        raise ScenarioError(str(e)) from None
    unmanaged_allocator = _unmanaged_allocator(top.table("unmanaged"))
    rebalance = _rebalance_events(path, data.get("event") or [])

    pfl = _pfl(top.table("layout"), cluster.oss_count * cluster.osts_per_oss)
    if pfl and rebalance:
        raise top.err("layout", "a composite layout with rebalance events is not modelled")

    top.used.add("workload")
    raw_workloads = data.get("workload", [])
    if not isinstance(raw_workloads, list) or not raw_workloads:
        raise top.err("workload", "at least one [[workload]] table is needed")
    workloads = tuple(_workload(_Table(path, f"workload[{i}].", w), i, raw_workloads, seed)
                      for i, w in enumerate(raw_workloads))
    top.finish()
    return Scenario(name=name, path=path, description=description, duration_s=duration_s,
                    step_s=step_s, seed=seed, policies=policies, policy_params=policy_params,
                    cluster=cluster, workloads=workloads, oss_model=oss_model,
                    mds_model=mds_model, purge=purge, network=network,
                    network_params=network_params, events=events,
                    unmanaged_allocator=unmanaged_allocator,
                    rebalance=rebalance, pfl=pfl)


def _policy_params(pp: _Table) -> dict[str, dict]:
    """``[policy_params.<policy>]``: each known policy's table of known parameters (its
    own, :func:`lustre_alloc.mapper.policies.registry.policy_param_names`, or the gate's)."""
    policy_params = {k: dict(v) for k, v in pp.data.items()}
    pp.used.update(pp.data)
    for k, params in policy_params.items():
        if k not in POLICIES:
            raise pp.err(k, "unknown policy")
        try:
            kwargs, _ = policy_kwargs(k, params, "policy_params")
        except PolicyParamError as exc:
            raise ScenarioError(f"{pp.path}: {exc}") from None
        for key in kwargs:
            if key not in GATE_PARAMS and key not in policy_param_names(k):
                raise pp.err(f"{k}.{key}", f"unknown parameter of {k}; known: "
                             f"{', '.join(policy_param_names(k) + GATE_PARAMS)}")
    return policy_params


def _initial_fill(f: _Table) -> InitialFill:
    """``[cluster.initial_fill]`` in one of :data:`FILL_MODES` (referenced files must
    exist)."""
    mode = f.get("mode", str, "explicit")
    if mode not in FILL_MODES:
        raise f.err("mode", f"unknown mode {mode!r} (known: {', '.join(FILL_MODES)})")
    fill_kw: dict[str, Any] = {"mode": mode,
                               "files_gib": f.get("files_gib", float, None, minimum=0.001)}
    if mode == "explicit":
        fill_kw["used_fraction"] = tuple(float(x) for x in f.get("used_fraction", list))
        if any(not 0.0 <= x <= 1.0 for x in fill_kw["used_fraction"]):
            raise f.err("used_fraction", "every value must be within 0..1")
    elif mode == "generated":
        fill_kw["hot_osts"] = f.get("hot_osts", int, minimum=0)
        fill_kw["hot_fraction"] = f.get("hot_fraction", float, minimum=0.0, maximum=1.0)
        lo_hi = f.get("cold_fraction", list)
        if len(lo_hi) != 2 or not 0 <= lo_hi[0] <= lo_hi[1] <= 1:
            raise f.err("cold_fraction", "expected [lo, hi] with 0 <= lo <= hi <= 1")
        fill_kw["cold_fraction"] = (float(lo_hi[0]), float(lo_hi[1]))
    else:
        fill_kw["path"] = _expand(f.path, f.get("path", str))
        if not fill_kw["path"].is_file():
            raise f.err("path", f"file not found: {fill_kw['path']}")
        fill_kw["filesystem"] = f.get("filesystem", str)
        fill_kw["snapshot"] = f.get("snapshot", int, 0, minimum=0)
        if "ost_map" in f.data:
            fill_kw["ost_map"] = _expand(f.path, f.get("ost_map", str))
            if not fill_kw["ost_map"].is_file():
                raise f.err("ost_map", f"file not found: {fill_kw['ost_map']}")
    f.finish()
    return InitialFill(**fill_kw)


def _cluster(c: _Table) -> ClusterSpec:
    """``[cluster]`` with its initial fill; without an ``lfs df`` fill the OSS count and
    OST size are required and the fill must fit the OST count."""
    f = c.table("initial_fill")
    fill = _initial_fill(f)
    lfs_df = fill.mode == "lfs_df"

    def per_target(key: str, required: bool = False, allow_zero: bool = False) -> TargetValues | None:
        c.used.add(key)
        if key not in c.data:
            if required:
                raise c.err(key, "missing")
            return None
        try:
            return parse_target_values(f"{c.prefix}{key}", c.data[key],
                                       lambda raw: _expand(c.path, raw), allow_zero=allow_zero)
        except TargetValueError as e:
            raise ScenarioError(f"{c.path}: {e}") from None

    cluster = ClusterSpec(
        oss_count=c.get("oss_count", int, 0 if lfs_df else ..., minimum=0),
        osts_per_oss=c.get("osts_per_oss", int, minimum=1),
        ost_size_gib=c.get("ost_size_gib", float, 0.0 if lfs_df else ..., minimum=0.0),
        ost_bandwidth_mib_s=per_target("ost_bandwidth_mib_s", required=True),
        ost_read_bandwidth_mib_s=per_target("ost_read_bandwidth_mib_s"),
        ost_latency_ms=per_target("ost_latency_ms", allow_zero=True),
        oss_nic_mib_s=per_target("oss_nic_mib_s"),
        oss_cpu_mib_s=per_target("oss_cpu_mib_s"),
        initial_fill=fill,
        statfs_interval_s=c.get("statfs_interval_s", float, 5.0, minimum=0.001),
        stats_interval_s=c.get("stats_interval_s", float, 5.0, minimum=0.001),
        osd=c.get("osd", str, "ldiskfs"),
    )
    if cluster.osd not in OSDS:
        raise c.err("osd", f"{cluster.osd!r}: expected one of {', '.join(OSDS)}")
    c.finish()
    if not lfs_df:
        if cluster.oss_count < 1:
            raise c.err("oss_count", "must be >= 1")
        if cluster.ost_size_gib <= 0:
            raise c.err("ost_size_gib", "must be > 0")
        n = cluster.oss_count * cluster.osts_per_oss
        if fill.mode == "explicit" and len(fill.used_fraction) != n:
            raise f.err("used_fraction", f"has {len(fill.used_fraction)} values for {n} OSTs")
        if fill.mode == "generated" and fill.hot_osts > n:
            raise f.err("hot_osts", f"{fill.hot_osts} > {n} OSTs")
    return cluster


def _purge(pu: _Table) -> PurgeSpec:
    """``[purge]``: the site's purge policy (off unless ``enabled``)."""
    purge = PurgeSpec(enabled=pu.get("enabled", bool, False),
                      interval_s=pu.get("interval_s", float, 3600.0, minimum=1.0),
                      age_s=pu.get("age_s", float, 43200.0, minimum=0.0),
                      when_used_above=pu.get("when_used_above", float, 0.0, minimum=0.0, maximum=1.0))
    pu.finish()
    return purge


def _network(net: _Table) -> tuple[str, dict[str, float]]:
    """``[network]``: the model's name and its float parameters, checked by building it
    once (:func:`lustre_alloc.simulator.network.model.make_network`)."""
    model = net.get("model", str, "none")
    params = {k: float(v) for k, v in net.data.items() if k != "model"}
    net.used.update(net.data)
    from lustre_alloc.simulator.network.model import make_network
    try:
        make_network(model, **params)
    except (ValueError, TypeError) as e:
        raise net.err("model", str(e)) from None
    return model, params


def _unmanaged_allocator(um: _Table) -> str:
    """``[unmanaged] allocator``: which of Lustre's own allocators places the creates
    the mapper does not manage."""
    allocator = um.get("allocator", str, "lustre_qos")
    if allocator not in ("lustre_qos", "round_robin"):
        raise um.err("allocator", f"expected 'lustre_qos' or 'round_robin' (Lustre's own "
                                  f"allocators), got {allocator!r}")
    um.finish()
    return allocator


def _rebalance_events(path: Path, events: list) -> tuple:
    """The ``[[event]]`` tables of kind ``rebalance`` and ``migrate``, parsed
    (:func:`lustre_alloc.simulator.rebalance.plan_event.parse_rebalance_event`,
    :func:`lustre_alloc.simulator.rebalance.service_event.parse_migrate_event`)."""
    from lustre_alloc.simulator.rebalance.service_event import parse_migrate_event
    from lustre_alloc.simulator.rebalance.plan_event import parse_rebalance_event
    parse = {"rebalance": parse_rebalance_event, "migrate": parse_migrate_event}
    return tuple(parse[e["kind"]](_Table(path, f"event[{i}].", e))
                 for i, e in enumerate(events)
                 if isinstance(e, dict) and e.get("kind") in parse)


def _workload(t: _Table, i: int, raw_workloads: list, seed: int) -> WorkloadSpec:
    """``[[workload]]`` number ``i``: exactly one source key (trace, generator, darshan,
    background, or reads of another writing workload); background is never managed."""
    w = t.data
    kinds = [k for k in ("trace", "generator", "darshan", "background", "reads") if k in w]
    if len(kinds) != 1:
        raise t.err("trace|generator|darshan|background|reads", "exactly one of these keys is needed")
    kind = kinds[0]
    if kind == "reads":
        source = t.get(kind, int, minimum=0)
        if source >= len(raw_workloads) or source == i or "reads" in raw_workloads[source] \
                or "background" in raw_workloads[source]:
            raise t.err("reads", f"expected the index of another writing workload, got {source}")
        source = str(source)
    else:
        source = t.get(kind, str)
    if kind in ("trace", "background"):
        p = _expand(t.path, source)
        if not p.is_file():
            raise t.err(kind, f"trace file not found: {p}")
        source = str(p)
    elif kind == "darshan":
        p = _expand(t.path, source)
        source = str(p) if p.is_file() else source  # else: a shipped example log's name
    ws = WorkloadSpec(kind=kind, source=source, seed=t.get("seed", int, seed),
                      jobid=t.get("jobid", str, None),
                      params=dict(t.get("params", dict, {})),
                      repeat_every_s=t.get("repeat_every_s", float, None, minimum=1.0),
                      start_s=t.get("start_s", float, 0.0, minimum=0.0),
                      managed=_managed(t),
                      reads_after_s=t.get("after_s", float, 0.0, minimum=0.0) if kind == "reads" else 0.0,
                      reads_fraction=t.get("fraction", float, 1.0, minimum=0.0, maximum=1.0)
                      if kind == "reads" else 1.0,
                      size_hint=_size_hint(t))
    if kind == "background" and ws.managed != 0.0:
        if "managed" in w:
            raise t.err("managed", "background traffic is never managed")
        from dataclasses import replace as _replace
        ws = _replace(ws, managed=0.0)
    t.finish()
    return ws


def _pfl(t: _Table, n_osts: int) -> tuple[tuple[int, int], ...]:
    """``[layout] pfl = [{end_bytes = ..., stripe_count = ...}, ...]``: component ends
    ascending, multiples of 64 KiB (``lfs setstripe -E``), the last ``-1`` (``-E -1``:
    ``LUSTRE_EOF``); stripe counts 1..OSTs or -1 (every OST)."""
    from lustre_alloc.mapper.policies.composite import LUSTRE_EOF
    raw = t.get("pfl", list, [])
    t.finish()
    out: list[tuple[int, int]] = []
    for i, c in enumerate(raw):
        ct = _Table(t.path, f"{t.prefix}pfl[{i}].", c if isinstance(c, dict) else {})
        end = ct.get("end_bytes", int, minimum=-1)
        count = ct.get("stripe_count", int, minimum=-1, maximum=n_osts or None)
        ct.finish()
        last = i == len(raw) - 1
        if count == 0:
            raise ct.err("stripe_count", "must be -1 or 1..OSTs")
        if last != (end == -1):
            raise ct.err("end_bytes", "only the last component ends at -1 (LUSTRE_EOF)")
        if not last and (end <= 0 or end % 65536 or (out and end <= out[-1][0])):
            raise ct.err("end_bytes", "must be a multiple of 65536 above the previous end")
        out.append((LUSTRE_EOF if last else end, count))
    return tuple(out)


def _size_hint(t: _Table) -> str | int:
    """``size_hint = "none" | "per_file" | "final" | "at_close" | <bytes>`` of a workload
    table."""
    t.used.add("size_hint")
    raw = t.data.get("size_hint", "none")
    if raw in SIZE_HINTS:
        return raw
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    raise t.err("size_hint", f'expected "none", "per_file", "final", "at_close" or a number of '
                             f'bytes >= 0, got {raw!r}')


def _managed(t: _Table) -> float:
    """``managed = true|false|fraction`` of a workload table, as a fraction."""
    t.used.add("managed")
    raw = t.data.get("managed", True)
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, (int, float)) and 0.0 <= raw <= 1.0:
        return float(raw)
    raise t.err("managed", f"expected true, false or a fraction 0..1 of the jobs, got {raw!r}")
