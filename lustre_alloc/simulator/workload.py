"""Turn a scenario's workloads into one time-ordered stream of trace records.

Each workload is a v1 trace file, a generator (:mod:`lustre_alloc.traces.generators`) or a real
Darshan log (:mod:`lustre_alloc.traces.darshan_import`). A workload with ``repeat_every_s`` is
replayed every that many seconds; replay ``k`` gets job id ``<job>#k`` and its files a
``r<k>/`` prefix so replays never share files. Streams are merged by timestamp.
"""
from __future__ import annotations

import math
import zlib
from typing import Iterable, Iterator

from lustre_alloc.traces.format import TraceFormatError, TraceRecord, merge_traces, read_trace

from lustre_alloc.simulator.scenario import Scenario, ScenarioError, WorkloadSpec


BACKGROUND_JOB = "lmt-background"
"""Job id of replayed background traffic (never managed)."""


def is_managed(jobid: str, fraction: float, seed: int) -> bool:
    """Whether job ``jobid`` of a workload with ``managed = fraction`` goes through the mapper.

    A seeded CRC32 of the job id against the fraction, so every policy's run and every
    replay of the same job agree, and about ``fraction`` of the jobs are managed."""
    if fraction >= 1.0:
        return True
    if fraction <= 0.0:
        return False
    return zlib.crc32(f"{seed}:{jobid}".encode()) / 2**32 < fraction


def _background_records(spec: WorkloadSpec) -> Iterator[TraceRecord]:
    """Background traffic as internal records: a ``read`` naming the OST, and a ``write``
    naming the OST (no file: it loads the OST's bandwidth, not its space; trace files
    cannot express this, only background files can)."""
    from lustre_alloc.traces.lmt import LmtError, read_background
    try:
        rows = read_background(spec.source)
    except LmtError as e:
        raise ScenarioError(str(e)) from None
    job = spec.jobid or BACKGROUND_JOB
    for t, ost, rb, wb in rows:
        if rb:
            yield TraceRecord(t, "read", job, "", rb, 0, 0, ost, max(1, rb >> 20))
        if wb:
            yield TraceRecord(t, "write", job, "", wb, 0, 0, ost, max(1, wb >> 20))


def _read_back_records(spec: WorkloadSpec, scenario: Scenario) -> list[TraceRecord]:
    """Reads of the files workload ``spec.source`` writes: each (a seeded ``reads_fraction``
    of them) read whole ``reads_after_s`` after its last write, unless deleted by then."""
    src = scenario.workloads[int(spec.source)]
    size: dict[str, int] = {}
    last: dict[str, float] = {}
    job: dict[str, str] = {}
    gone: dict[str, float] = {}
    for r in workload_records(src, scenario.duration_s):
        if r.op == "write":
            size[r.file_id] = size.get(r.file_id, 0) + r.bytes
            last[r.file_id] = r.timestamp_s
            job[r.file_id] = r.jobid
        elif r.op == "delete":
            gone[r.file_id] = r.timestamp_s
    out = []
    for fid, t in last.items():
        when = t + spec.reads_after_s + spec.start_s
        if when >= scenario.duration_s or gone.get(fid, math.inf) <= when or size[fid] == 0:
            continue
        if not is_managed(fid, spec.reads_fraction, spec.seed):   # the seeded selection
            continue
        out.append(TraceRecord(when, "read", spec.jobid or f"{job[fid]}.read", fid, size[fid],
                               0, 0, None, max(1, size[fid] >> 20)))
    out.sort(key=lambda r: r.timestamp_s)
    return out


def _base_records(spec: WorkloadSpec, duration_s: float) -> Iterable[TraceRecord]:
    if spec.kind == "background":
        return _background_records(spec)
    if spec.kind == "trace":
        return read_trace(spec.source)
    if spec.kind == "generator":
        from lustre_alloc.traces.generators import GENERATORS
        try:
            gen = GENERATORS[spec.source]
        except KeyError:
            raise ScenarioError(f"workload generator {spec.source!r} unknown "
                                f"(known: {', '.join(sorted(GENERATORS))})") from None
        return gen(duration_s, spec.seed, spec.jobid, **spec.params)
    from lustre_alloc.traces.darshan_import import import_darshan, resolve_log
    return import_darshan(resolve_log(spec.source), jobid=spec.jobid, **spec.params).records


def _replay(base: list[TraceRecord], k: int, offset: float) -> Iterator[TraceRecord]:
    """Replay ``k`` of ``base``: shifted by ``offset`` s, job ``<job>#k``, files ``r<k>/...``."""
    for r in base:
        yield r._replace(timestamp_s=r.timestamp_s + offset, jobid=f"{r.jobid}#{k}",
                         file_id=f"r{k}/{r.file_id}" if r.file_id else "")


def workload_records(spec: WorkloadSpec, duration_s: float) -> Iterator[TraceRecord]:
    """Records of one workload with ``timestamp_s < duration_s``, time-ordered."""
    if spec.repeat_every_s is None:
        for r in _base_records(spec, duration_s):
            ts = r.timestamp_s + spec.start_s
            if ts >= duration_s:
                return
            yield r._replace(timestamp_s=ts) if spec.start_s else r
        return
    base = list(_base_records(spec, duration_s))
    replays = math.ceil(max(0.0, duration_s - spec.start_s) / spec.repeat_every_s)
    # One generator per replay, each binding its own k and offset (a generator expression
    # in the loop would read k and offset only when merge_traces consumes it: every replay
    # would then be the last one, at the same time, with the same job id and files).
    streams = [_replay(base, k, spec.start_s + k * spec.repeat_every_s) for k in range(replays)]
    for r in merge_traces(streams):
        if r.timestamp_s >= duration_s:
            return
        yield r


def _records(spec: WorkloadSpec, scenario: Scenario) -> Iterator[TraceRecord]:
    if spec.kind == "reads":
        return iter(_read_back_records(spec, scenario))
    return workload_records(spec, scenario.duration_s)


def scenario_records(scenario: Scenario) -> Iterator[TraceRecord]:
    """All workloads of ``scenario`` merged by timestamp (a fresh stream each call)."""
    return merge_traces(_records(w, scenario) for w in scenario.workloads)


def unmanaged_jobs(scenario: Scenario) -> frozenset[str]:
    """Job ids whose creates Lustre's own allocator places (workloads with ``managed < 1``)."""
    out = set()
    for spec in scenario.workloads:
        if spec.managed >= 1.0:
            continue
        for r in _records(spec, scenario):
            if not is_managed(r.jobid, spec.managed, spec.seed):
                out.add(r.jobid)
    return frozenset(out)


def size_hints(scenario: Scenario) -> dict[str, str | int]:
    """jobid -> ``size_hint`` of its workload, for the workloads that hint sizes at all
    (:attr:`lustre_alloc.simulator.scenario.WorkloadSpec.size_hint`; the others send 0)."""
    out: dict[str, str | int] = {}
    for spec in scenario.workloads:
        if spec.size_hint == "none":
            continue
        for r in _records(spec, scenario):
            out[r.jobid] = spec.size_hint
    return out


def check_workloads(scenario: Scenario, ost_count: int) -> dict[str, int]:
    """Validate every workload against the cluster before any run starts.

    Reads every record once (nothing is run half-loaded): format errors, stripe
    counts larger than the OST count, read OST ids outside the cluster, reads or
    deletes of files never written.

    Returns:
        counts: records per operation (``write``, ``read``, ``delete``).
    Raises:
        ScenarioError: one line naming the workload and the problem.
    """
    counts = {"write": 0, "read": 0, "delete": 0}
    for i, spec in enumerate(scenario.workloads):
        where = f"{scenario.path}: workload[{i}] ({spec.kind} {spec.source})"
        live: set[str] = set()
        try:
            for r in _records(spec, scenario):
                counts[r.op] += 1
                if r.op == "write" and r.ost is not None:      # background traffic
                    if r.ost >= ost_count:
                        raise ScenarioError(f"{where}: traffic on OST {r.ost} at t={r.timestamp_s}, "
                                            f"the cluster has OSTs 0..{ost_count - 1}")
                    continue
                if r.op == "write":
                    if r.stripe_count > ost_count:
                        raise ScenarioError(f"{where}: stripe_count {r.stripe_count} at "
                                            f"t={r.timestamp_s} exceeds the {ost_count} OSTs")
                    live.add(r.file_id)
                elif r.op == "read":
                    if r.ost is not None and r.ost >= ost_count:
                        raise ScenarioError(f"{where}: read of OST {r.ost} at t={r.timestamp_s}, "
                                            f"the cluster has OSTs 0..{ost_count - 1}")
                    if r.file_id and r.file_id not in live and spec.kind != "reads":
                        raise ScenarioError(f"{where}: read of {r.file_id!r} before it is written")
                elif r.file_id not in live:
                    raise ScenarioError(f"{where}: delete of unknown file {r.file_id!r}")
                else:
                    live.discard(r.file_id)
        except TraceFormatError as e:
            raise ScenarioError(f"{where}: {e}") from None
        except (FileNotFoundError, ValueError) as e:
            if isinstance(e, ScenarioError):
                raise
            raise ScenarioError(f"{where}: {e}") from None
    return counts
