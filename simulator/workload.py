"""Turn a scenario's workloads into one time-ordered stream of trace records.

Each workload is a v1 trace file, a generator (:mod:`traces.generators`) or a real
Darshan log (:mod:`traces.darshan_import`). A workload with ``repeat_every_s`` is
replayed every that many seconds; replay ``k`` gets job id ``<job>#k`` and its files a
``r<k>/`` prefix so replays never share files. Streams are merged by timestamp.
"""
from __future__ import annotations

import math
from typing import Iterable, Iterator

from traces.format import TraceFormatError, TraceRecord, merge_traces, read_trace

from simulator.scenario import Scenario, ScenarioError, WorkloadSpec


def _base_records(spec: WorkloadSpec, duration_s: float) -> Iterable[TraceRecord]:
    if spec.kind == "trace":
        return read_trace(spec.source)
    if spec.kind == "generator":
        from traces.generators import GENERATORS
        try:
            gen = GENERATORS[spec.source]
        except KeyError:
            raise ScenarioError(f"workload generator {spec.source!r} unknown "
                                f"(known: {', '.join(sorted(GENERATORS))})") from None
        return gen(duration_s, spec.seed, spec.job_id, **spec.params)
    from traces.darshan_import import import_darshan, resolve_log
    return import_darshan(resolve_log(spec.source), job_id=spec.job_id, **spec.params).records


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
    streams = []
    for k in range(replays):
        offset = spec.start_s + k * spec.repeat_every_s
        streams.append(r._replace(timestamp_s=r.timestamp_s + offset,
                                  job_id=f"{r.job_id}#{k}",
                                  file_id=f"r{k}/{r.file_id}" if r.file_id else "")
                       for r in base)
    for r in merge_traces(streams):
        if r.timestamp_s >= duration_s:
            return
        yield r


def scenario_records(scenario: Scenario) -> Iterator[TraceRecord]:
    """All workloads of ``scenario`` merged by timestamp (a fresh stream each call)."""
    return merge_traces(workload_records(w, scenario.duration_s) for w in scenario.workloads)


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
            for r in workload_records(spec, scenario.duration_s):
                counts[r.op] += 1
                if r.op == "write":
                    if r.stripe_count > ost_count:
                        raise ScenarioError(f"{where}: stripe_count {r.stripe_count} at "
                                            f"t={r.timestamp_s} exceeds the {ost_count} OSTs")
                    live.add(r.file_id)
                elif r.op == "read":
                    if r.ost is not None and r.ost >= ost_count:
                        raise ScenarioError(f"{where}: read of OST {r.ost} at t={r.timestamp_s}, "
                                            f"the cluster has OSTs 0..{ost_count - 1}")
                    if r.file_id and r.file_id not in live:
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
