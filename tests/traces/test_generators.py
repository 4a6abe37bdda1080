"""The IOR, HACC-IO and TPA generators: rates, shapes, determinism, the HACC data file."""
from __future__ import annotations

import csv
import gzip
import itertools
from collections import Counter

import pytest

from lustre_alloc.traces.format import merge_traces, validate_trace, write_trace
from lustre_alloc.traces.generators import (default_hacc_csv, GENERATORS, GeneratorParameterError,
                               HaccDataError, hacc, ior, load_hacc_jobs, tpa)

DAY = 86400.0
PAPER_RATE = {"ior": 20_000, "hacc": 12_000, "tpa": 15_000}  # Section IV-A3


@pytest.fixture(scope="module")
def day_traces():
    """A 24 h trace of each generator (seed 1), built once: ~0.5 s in all."""
    return {name: list(fn(DAY, 1)) for name, fn in GENERATORS.items()}


@pytest.mark.parametrize("name", sorted(PAPER_RATE))
def test_24h_trace_reaches_the_papers_operation_rate_within_10_percent(day_traces, name):
    ops = sum(r.ops for r in day_traces[name])
    assert ops / DAY == pytest.approx(PAPER_RATE[name], rel=0.10)


@pytest.mark.parametrize("name", sorted(PAPER_RATE))
def test_24h_trace_stays_at_or_below_60000_records(day_traces, name):
    assert 1000 < len(day_traces[name]) <= 60_000


@pytest.mark.parametrize("name", sorted(PAPER_RATE))
def test_records_are_time_ordered_within_the_duration(day_traces, name):
    ts = [r.timestamp_s for r in day_traces[name]]
    assert ts == sorted(ts)
    assert 0 <= ts[0] and ts[-1] < DAY


def test_one_hour_rate_is_also_within_10_percent():
    for name, fn in GENERATORS.items():
        ops = sum(r.ops for r in fn(3600.0, 5))
        assert ops / 3600.0 == pytest.approx(PAPER_RATE[name], rel=0.10), name


def test_day_of_all_three_writes_tens_of_tib_and_keeps_little(day_traces):
    tib = 1 << 40
    written = sum(r.bytes for t in day_traces.values() for r in t if r.op == "write")
    assert 20 * tib < written < 80 * tib  # visible on 32 x 8 TiB, far from full
    # what is still on disk at the end: IOR deleted everything, HACC keeps 3 checkpoints
    size: dict[str, int] = Counter()
    for r in merge_traces(day_traces.values()):
        if r.op == "write":
            size[r.file_id] += r.bytes
        elif r.op == "delete":
            del size[r.file_id]
    live = sum(size.values())
    assert live < 8 * tib


def test_merged_day_validates_and_file_ids_do_not_collide(tmp_path, day_traces):
    p = tmp_path / "day.csv.gz"
    write_trace(p, merge_traces(day_traces.values()))
    s = validate_trace(p)
    assert s.records == sum(len(t) for t in day_traces.values())
    assert s.jobs == frozenset({"ior.1", "hacc.1", "tpa.1"})
    for name, t in day_traces.items():
        assert all(r.file_id.startswith(f"{name}.1/") for r in t)


@pytest.mark.parametrize("name", sorted(PAPER_RATE))
def test_same_seed_gives_identical_trace_and_other_seed_differs(name):
    fn = GENERATORS[name]
    a = list(fn(7200.0, 11))
    assert a == list(fn(7200.0, 11))
    b = list(fn(7200.0, 12, jobid=f"{name}.11"))
    assert a != b


def test_job_id_names_job_and_prefixes_files():
    recs = list(tpa(600.0, 1, jobid="bank.7"))
    assert {r.jobid for r in recs} == {"bank.7"}
    assert all(r.file_id.startswith("bank.7/") for r in recs)


def test_ior_iteration_writes_reads_back_then_deletes_each_file():
    recs = list(ior(DAY, 3, num_procs=8))
    by_file: dict[str, list[str]] = {}
    for r in recs:
        by_file.setdefault(r.file_id, []).append(r.op)
    assert set(map(tuple, by_file.values())) == {("write", "read", "delete")}
    w = next(r for r in recs if r.op == "write")
    assert w.bytes == 1 << 30 and w.ops == (1 << 30) // (16 << 10) and w.stripe_count == 1


def test_ior_keep_files_and_no_read_back_leave_only_writes():
    recs = list(ior(3600.0, 3, keep_files=True, read_back=False))
    assert {r.op for r in recs} == {"write"}
    assert sum(r.ops for r in recs) / 3600.0 == pytest.approx(20_000, rel=0.10)


def test_hacc_checkpoints_are_hourly_bursts_of_scaled_real_size(day_traces):
    recs = day_traces["hacc"]
    writes = [r for r in recs if r.op == "write"]
    ckpts: dict[str, list] = {}
    for r in writes:
        ckpts.setdefault(r.file_id.split("/")[1], []).append(r)
    assert len(ckpts) == 24
    real = load_hacc_jobs()[0].bytes_written
    for k, rs in ckpts.items():
        assert sum(r.bytes for r in rs) == int(real * 32 / 248)
        assert len({r.file_id for r in rs}) == 4096 // 8
        start = min(r.timestamp_s for r in rs)
        assert max(r.timestamp_s for r in rs) - start <= 169  # longest real walltime
        assert start == pytest.approx(600 + 3600 * int(k[4:]), abs=100)


def test_hacc_keeps_only_the_last_three_checkpoints(day_traces):
    files_of: Counter = Counter()  # live files per checkpoint
    most = 0
    for r in day_traces["hacc"]:
        ck = r.file_id.split("/")[1]
        if r.op == "write":
            files_of[ck] += 0 if files_of[ck] else 1  # count checkpoints, not records
        elif r.op == "delete":
            files_of[ck] = 0
        live = sum(1 for v in files_of.values() if v)
        most = max(most, live)
    # 3 kept + the one being written before the oldest is deleted
    assert most == 4
    deleted = {r.file_id.split("/")[1] for r in day_traces["hacc"] if r.op == "delete"}
    assert deleted == {f"ckpt{k:05d}" for k in range(21)}


def test_hacc_burst_walltimes_come_from_the_real_jobs():
    jobs = load_hacc_jobs()
    walls = sorted(j.walltime_s for j in jobs)
    recs = list(hacc(6 * 3600.0, 2, records_per_file=4))
    spans = []
    for k in range(5):
        ts = [r.timestamp_s for r in recs if r.op == "write" and f"/ckpt{k:05d}/" in r.file_id]
        spans.append(max(ts) - min(ts))
    # a burst spans 3/4 to all of a real run's walltime (4 records evenly spread over it)
    assert all(walls[0] * 0.5 <= s <= walls[-1] for s in spans)


def test_hacc_csv_loader_reads_the_nersc_file_independently():
    jobs = load_hacc_jobs()
    with gzip.open(default_hacc_csv(), "rt") as fh:
        rows = list(csv.DictReader(fh))
    assert len(jobs) == len(rows) == 162
    assert jobs[0].jobid == rows[0]["_jobid"] == "6242003"
    assert jobs[0].bytes_written == 8_899_172_302_848
    assert {j.nprocs for j in jobs} == {4096} and {j.ost_count for j in jobs} == {248}
    assert [j.walltime_s for j in jobs] == [float(r["darshan_walltime"]) for r in rows]


def test_hacc_fails_clearly_when_the_csv_is_missing(tmp_path):
    missing = tmp_path / "nope.csv.gz"
    with pytest.raises(HaccDataError, match=r"nope.csv.gz: HACC-IO job summary not found"):
        list(hacc(3600.0, 1, hacc_csv=missing))


def test_hacc_csv_without_needed_column_is_named(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("_jobid,darshan_nprocs\n1,4096\n")
    with pytest.raises(HaccDataError, match="missing column.*darshan_biggest_write_api_bytes"):
        load_hacc_jobs(p)


def test_hacc_csv_with_garbled_value_names_its_line(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("_jobid,darshan_nprocs,darshan_biggest_write_api_bytes,"
                 "darshan_biggest_write_api_files,darshan_walltime,fshealth_ost_count\n"
                 "1,4096,10,4096,30,248\n2,lots,10,4096,30,248\n")
    with pytest.raises(HaccDataError, match=r"bad.csv:3:"):
        load_hacc_jobs(p)


def test_tpa_creates_its_database_first_then_small_read_dominated_io(day_traces):
    recs = day_traces["tpa"]
    creates = recs[:32]
    assert all(r.op == "write" and r.bytes == 16 << 30 for r in creates)
    rest = recs[32:]
    assert {r.file_id for r in rest} <= {r.file_id for r in creates}
    assert not any(r.op == "delete" for r in recs)
    reads = sum(r.ops for r in rest if r.op == "read")
    writes = sum(r.ops for r in rest if r.op == "write")
    assert reads / (reads + writes) == pytest.approx(0.8, abs=0.01)
    per_op = sum(r.bytes for r in rest) / (reads + writes)
    assert 4096 <= per_op <= 8192


def test_tpa_hot_files_get_most_operations(day_traces):
    ops = Counter()
    for r in day_traces["tpa"][32:]:
        ops[r.file_id] += r.ops
    top = sum(n for _, n in ops.most_common(4))
    assert top / sum(ops.values()) > 0.4  # Zipf s=1 over 32 files: top 4 hold ~51 %


@pytest.mark.parametrize("fn, kwargs, name", [
    (ior, {"num_procs": 0}, "num_procs"),
    (ior, {"stripe_size": 1000}, "stripe_size"),
    (hacc, {"keep_last": 0}, "keep_last"),
    (tpa, {"read_fraction": 1.5}, "read_fraction"),
    (tpa, {"window_s": 0}, "window_s"),
])
def test_bad_parameter_is_named(fn, kwargs, name):
    with pytest.raises(GeneratorParameterError, match=f"^{name}: "):
        list(itertools.islice(fn(3600.0, 1, **kwargs), 1))


def test_every_parameter_has_a_default_and_a_documented_source():
    import inspect
    for name, fn in GENERATORS.items():
        doc = fn.__doc__ or ""
        for p in list(inspect.signature(fn).parameters.values())[3:]:
            assert p.default is not inspect.Parameter.empty, (name, p.name)
            assert f"    {p.name}:" in doc, (name, p.name)


@pytest.mark.parametrize("name", sorted(PAPER_RATE))
def test_written_trace_reads_back_equal_to_the_generated_records(tmp_path, name):
    from lustre_alloc.traces.format import load_trace
    recs = list(GENERATORS[name](3600.0, 9))
    p = tmp_path / f"{name}.csv.gz"
    write_trace(p, recs)
    assert load_trace(p) == recs
