"""The eventful, heterogeneous world: validation against what real systems do, events
reaching the mapper through samples, unmanaged load, reads, bad input."""
import numpy as np
import pytest

from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.mapper.state.cluster_state import OstFlag
from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario
from lustre_alloc.simulator.workload import scenario_records, unmanaged_jobs

from .conftest import rec

MIB = 1 << 20


def cluster(n_oss=2, per=2, bw="100", fill=None, duration=3600, extra="", workloads=None):
    n = n_oss * per
    fill = fill if fill is not None else [0.0] * n
    body = f"""
name = "w"
duration_s = {duration}
seed = 7
policies = ["round_robin"]

[cluster]
oss_count = {n_oss}
osts_per_oss = {per}
ost_size_gib = 100
ost_bandwidth_mib_s = {bw}

[cluster.initial_fill]
mode = "explicit"
used_fraction = {fill}
{extra}
"""
    return body + (workloads if workloads is not None else '\n[[workload]]\ntrace = "t.csv"\n')


class Spy:
    """A policy wrapper that records what the MDS view showed at each create."""

    def __init__(self, inner, sim_ref):
        self.inner, self.sim_ref, self.seen = inner, sim_ref, []
        self.name = inner.name

    def allocate(self, view, req):
        sim = self.sim_ref[0]
        self.seen.append((view.time_s, {o.index: (o.active, o.flags, o.oss, o.write_bytes_per_s,
                                                  o.failed_over) for o in view.osts},
                          {o.index: o.write_bytes_per_s for o in sim.mds.store.snapshot.osts}
                          if sim.mds.store else {}))
        return self.inner.allocate(view, req)


def run_spy(sc, policy="round_robin"):
    cl = prepare(sc)
    ref = [None]
    spy = Spy(make_policy(policy, seed=sc.seed), ref)
    sim = Simulation(sc, cl, spy, scenario_records(sc), make_network("none"),
                     unmanaged_jobs=unmanaged_jobs(sc))
    ref[0] = sim
    return sim.run(), spy.seen


# -- validation against real systems -------------------------------------------------------
@pytest.mark.parametrize("k", [2, 4, 8])
def test_one_slow_ost_bounds_a_file_per_process_job_under_round_robin(make_scenario, k):
    # 8 OSTs, OST 5 at 1/k of the others' 200 MiB/s; a stripe-1 file-per-process job writes
    # 8 x 200 MiB at once. RR gives each file its own OST, so the job ends when the slow
    # OST's file does: job I/O time = k x the other files' time (as on real systems).
    bw = [200.0] * 8
    bw[5] = 200.0 / k
    body = cluster(n_oss=4, per=2, bw=str(bw))
    recs = [rec(0, "write", "fpp", f"f{i}", 200 * MIB) for i in range(8)]
    sc = load_scenario(make_scenario(body, recs))
    r = run_policy(sc, prepare(sc), "round_robin")
    job = r.jobs["fpp"]
    others = np.sort(r.file_write_s)[:-1]
    assert others == pytest.approx(np.ones(7))            # 200 MiB at 200 MiB/s
    assert job.io_time_s == pytest.approx(k * np.median(others))
    assert job.slowdown == pytest.approx(1.0)             # alone it is just as bound


def test_expansion_under_lustre_qos_weights_new_empty_osts_by_free_space(make_scenario):
    # 8 OSTs 60% full; at t=100 two empty OSTs arrive (20% of the OSTs, 38% of the free
    # space). Lustre's QOS weighs OSTs by free space, so the new ones get more than their
    # share of OSTs.
    extra = '\n[[event]]\nkind = "add_osts"\nat_s = 100\ncount = 2\nosts_per_oss = 2\n'
    body = cluster(n_oss=4, per=2, fill=[0.6] * 8, extra=extra)
    recs = [rec(200 + i, "write", "j", f"f{i}", MIB) for i in range(400)]
    sc = load_scenario(make_scenario(body, recs))
    r, seen = run_spy(sc, "lustre_qos")
    last_view = seen[-1][1]
    assert sorted(last_view) == list(range(10))          # the new OSTs reached the view
    assert np.isnan(r.ost_used_hourly[0, 8:]).all()      # absent at t=0: left out of balance
    assert r.ost_used_hourly[0, :8] == pytest.approx(np.full(8, 0.6 * 100 * (1 << 30)), rel=1e-9)
    # Count stripes per OST from the final used bytes (1 MiB files).
    grown = np.round((r.ost_used_hourly[-1] - np.nan_to_num(r.ost_used_hourly[0])) / MIB)
    share_new = grown[8:].sum() / grown.sum()
    free = np.array([0.4] * 8 + [1.0] * 2)
    assert share_new > 2 / 10
    assert share_new > 0.5 * free[8:].sum() / free.sum() + 0.5 * 0.2   # nearer free-space weighting


def test_unmanaged_traffic_is_in_the_samples_within_one_stats_interval(make_scenario):
    # An unmanaged job writes 10 GiB from t=0 (placed by Lustre's allocator); a managed
    # job creates at t=6: the samples the mapper got since show the unmanaged writes.
    wl = ('\n[[workload]]\ntrace = "u.csv"\nmanaged = false\n'
          '\n[[workload]]\ntrace = "t.csv"\n')
    body = cluster(workloads=wl)
    make_scenario(body, [rec(0, "write", "bulk", "big", 10 << 30)], name="u")
    sc = load_scenario(make_scenario(body, [rec(6, "write", "app", "small", MIB)]))
    r, seen = run_spy(sc)
    assert r.counters["creates_unmanaged"] == 1
    t, view, store_rates = seen[0]
    assert t == 6.0
    loaded = [i for i, v in view.items() if v[3]]
    assert len(loaded) == 1 and view[loaded[0]][3] == pytest.approx(100 * MIB)
    assert store_rates[loaded[0]] == pytest.approx(100 * MIB)
    assert not r.jobs["bulk"].managed and r.jobs["app"].managed


# -- events reach the mapper through samples ----------------------------------------------
def test_degrade_event_slows_the_ost_and_the_mapper_sees_degraded(make_scenario):
    # A RAID rebuild on OST 1 from t=1: its file (400 MiB, 1 s at 100 MiB/s, then 300 MiB
    # at 25 MiB/s) ends at 13 s, the others at 4 s.
    extra = ('\n[[event]]\nkind = "degrade"\nat_s = 1\nost = 1\nfraction = 0.25\n'
             'duration_s = 100\n')
    body = cluster(extra=extra)
    recs = [rec(0, "write", "a", f"f{i}", 400 * MIB) for i in range(4)] + \
           [rec(10, "write", "b", "g", MIB), rec(200, "write", "c", "h", MIB)]
    sc = load_scenario(make_scenario(body, recs))
    r, seen = run_spy(sc)
    assert sorted(r.file_write_s)[2:] == pytest.approx([4.0, 4.0, 4.0, 13.0])
    assert r.jobs["a"].io_time_s == pytest.approx(13.0)
    assert r.jobs["a"].slowdown == pytest.approx(13.0 / 4.0)
    assert seen[0][1][1][1] == OstFlag.NONE                       # t=0: not degraded yet
    assert seen[4][1][1][1] & OstFlag.DEGRADED                    # t=10: the sample says so
    assert not seen[5][1][1][1] & OstFlag.DEGRADED                # t=200: over


def test_failed_ost_stalls_io_and_takes_no_creates_then_recovers(make_scenario):
    extra = ('\n[[event]]\nkind = "ost_state"\nat_s = 1\nost = 0\nstate = "failed"\n'
             'duration_s = 60\n')
    body = cluster(extra=extra)
    recs = [rec(0, "write", "a", "f0", 800 * MIB, sc=4)] + \
           [rec(10 + i, "write", "b", f"g{i}", MIB) for i in range(8)] + \
           [rec(100, "write", "c", "h", MIB)]
    sc = load_scenario(make_scenario(body, recs))
    r, seen = run_spy(sc)
    # f0 is striped over the 4 OSTs: 400 MiB in the first second, stalled from t=1 to
    # t=61 (clients wait for recovery; RAID0 waits for its slowest stripe), then 1 s more.
    assert r.jobs["a"].io_time_s == pytest.approx(62.0)
    for t, view, _ in seen[1:-1]:
        assert view[0][0] is False                                 # inactive to the mapper
    assert seen[-1][1][0][0] is True                               # back at t=100
    grown = r.ost_used_hourly[-1] - r.ost_used_hourly[0]
    assert grown[1:].sum() >= (600 + 8) * MIB                      # g0..g7 all avoided OST 0


def test_failover_moves_osts_to_the_partner_oss(make_scenario):
    extra = ('\n[[event]]\nkind = "failover"\nat_s = 0\noss = 0\nto_oss = 1\nrecovery_s = 20\n')
    body = cluster(extra=extra)
    recs = [rec(6, "write", "a", "f", MIB), rec(30, "write", "a", "g", MIB)]
    sc = load_scenario(make_scenario(body, recs))
    r, seen = run_spy(sc)
    assert not seen[0][1][0][0] and seen[0][1][0][2] == "oss1"    # in recovery, on oss1
    assert seen[1][1][0][0] and seen[1][1][1][2] == "oss1"        # recovered, still on oss1


def test_the_mapper_sees_an_ost_served_by_its_failover_partner(make_scenario):
    """Through the collectors' samples and the store: OST 0 first published by oss0, then
    by oss1 after the failover, is failed over; oss1's own OSTs are not."""
    extra = ('\n[[event]]\nkind = "failover"\nat_s = 10\noss = 0\nto_oss = 1\nrecovery_s = 5\n'
             'duration_s = 30\n')
    body = cluster(extra=extra)
    recs = [rec(6, "write", "a", "f", MIB), rec(12, "write", "a", "r", MIB),
            rec(30, "write", "a", "g", MIB), rec(60, "write", "a", "h", MIB)]
    sc = load_scenario(make_scenario(body, recs))
    _, seen = run_spy(sc)
    before, recovering, during, after = (s[1] for s in seen)
    assert before[0][2] == "oss0" and not before[0][4]
    # in recovery on the partner: its report (unavailable, not "no longer listed") counts
    assert recovering[0][2] == "oss1" and recovering[0][4] and not recovering[0][0]
    assert during[0][2] == "oss1" and during[0][4]                 # served by its partner
    assert during[2][2] == "oss1" and not during[2][4]             # oss1's own OST
    assert after[0][2] == "oss0" and not after[0][4]               # failed back


# -- reads --------------------------------------------------------------------------------
def test_reads_workload_reads_files_back_from_their_osts(make_scenario):
    wl = ('\n[[workload]]\ntrace = "t.csv"\n'
          '\n[[workload]]\nreads = 0\nafter_s = 100\n')
    body = cluster(workloads=wl)
    recs = [rec(0, "write", "ckpt", f"f{i}", 100 * MIB) for i in range(2)]
    sc = load_scenario(make_scenario(body, recs))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert r.apps["ckpt.read"].bytes_read == 200 * MIB
    assert r.file_read_s == pytest.approx([1.0, 1.0])
    assert r.jobs["ckpt.read"].first_io_s == pytest.approx(100.0)   # last write record + 100 s


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, msg", [
    ('[[event]]\nkind = "explode"\nat_s = 1\n', "event[0].kind: unknown event kind 'explode'"),
    ('[[event]]\nkind = "degrade"\nat_s = 1\nost = 9\nfraction = 0.5\n', "event[0].ost: OST 9 out of range"),
    ('[[event]]\nkind = "degrade"\nat_s = 1\nost = 1\nfraction = -0.5\n', "event[0].fraction: must be > 0"),
    ('[[event]]\nkind = "degrade"\nat_s = 4000\nost = 1\nfraction = 0.5\n', "event[0].at_s: 4000 is at or after the end"),
    ('[[event]]\nkind = "ost_state"\nat_s = 1\nost = 1\nstate = "melted"\n', "event[0].state: unknown state"),
    ('[[event]]\nkind = "failover"\nat_s = 1\noss = 0\nto_oss = 5\n', "event[0].to_oss: OSS 5 out of range"),
    ('[[event]]\nkind = "degrade"\nat_s = 1\nost = 1\nfraction = 0.5\nspeed = 2\n', "event[0].speed: unknown key"),
    ('[[event]]\nkind = "degrade"\nat_s = 1\nost = 1\noss = 0\nfraction = 0.5\n',
     "event[0].ost|oss: exactly one of these keys is needed"),
    ('[[event]]\nkind = "degrade"\nat_s = 1\nost = 1\nfraction = 0.5\nflagged = 1\n',
     "event[0].flagged: expected true or false"),
    ('[[event]]\nkind = "failover"\nat_s = 1\noss = 1\nto_oss = 1\n', "event[0].to_oss: the same OSS as oss"),
    ('[[event]]\nkind = "failover"\nat_s = 1\noss = [0, 1]\nto_oss = 2\n', "event[0].oss: one OSS per failover"),
    ('[[event]]\nkind = "add_osts"\nat_s = 1\ncount = 0\n', "event[0].count: expected an integer >= 1"),
    ('[[event]]\nkind = "add_osts"\nat_s = 1\ncount = 2\nosts_per_oss = true\n',
     "event[0].osts_per_oss: expected an integer >= 1"),
    ('[[event]]\nkind = "add_osts"\nat_s = 1\ncount = 2\nduration_s = 60\n',
     "event[0].duration_s: an expansion is permanent"),
])
def test_bad_events_are_rejected_with_one_line_naming_the_key(make_scenario, extra, msg):
    sc_path = make_scenario(cluster(extra="\n" + extra), [rec(0, "write", "a", "f", MIB)])
    with pytest.raises(ScenarioError) as e:
        prepare(load_scenario(sc_path))
    assert msg in str(e.value) and "\n" not in str(e.value) and str(sc_path) in str(e.value)


def test_negative_rate_and_bad_managed_are_rejected(make_scenario):
    p = make_scenario(cluster(bw="-5"), [rec(0, "write", "a", "f", MIB)])
    with pytest.raises(ScenarioError, match=r"cluster\.ost_bandwidth_mib_s: must be > 0"):
        load_scenario(p)
    p = make_scenario(cluster(workloads='\n[[workload]]\ntrace = "t.csv"\nmanaged = 2\n'),
                      [rec(0, "write", "a", "f", MIB)], name="m")
    with pytest.raises(ScenarioError, match=r"workload\[0\]\.managed: expected true, false or a fraction"):
        load_scenario(p)


# -- LMT import and background replay -------------------------------------------------------
def test_import_lmt_writes_per_ost_background_traffic(tmp_path):
    from lustre_alloc_data import resource_path
    from lustre_alloc.traces.cli import main
    from lustre_alloc.traces.lmt import read_background, read_lmt
    db = resource_path("pkg:lustre_alloc_data/nersc-pytokio/snx11025_2018-01-28.sqlite3")
    out = tmp_path / "bg.csv"
    assert main(["import-lmt", str(db), "--out", str(out)]) == 0
    rows = read_background(out)
    data = read_lmt(db)
    # every byte of the counters' differences is in the file, per OST
    written = {o: 0 for o in range(24)}
    for _, o, _, wb in rows:
        written[o] += wb
    diff = data.write_bytes[:, -1] - data.write_bytes[:, 0]
    assert [written[int(i)] for i in data.ost_index] == pytest.approx(diff, abs=61)
    assert main(["import-lmt", str(tmp_path / "missing.sqlite3"), "--out", str(out)]) == 1


def test_background_traffic_loads_osts_and_the_samples_but_not_space(make_scenario, tmp_path):
    from lustre_alloc.traces.lmt import write_background
    write_background(tmp_path / "bg.csv", [(0.0, 2, 0, 2000 * MIB), (0.0, 3, 200 * MIB, 0)])
    wl = '\n[[workload]]\nbackground = "bg.csv"\n\n[[workload]]\ntrace = "t.csv"\n'
    sc = load_scenario(make_scenario(cluster(workloads=wl), [rec(6, "write", "app", "f", MIB)]))
    r, seen = run_spy(sc)
    assert seen[0][1][2][3] == pytest.approx(100 * MIB)           # OST 2 busy at 100 MiB/s
    assert r.ost_used_hourly[-1, 2] <= MIB                        # no space used by it
    assert r.jobs["lmt-background"].background
    from lustre_alloc.simulator.report import summarise
    s = summarise(r)
    assert s["jobs"] == 1 and s["phases"] == 1                    # background is not a user job


def test_summary_carries_the_users_metric(make_scenario):
    recs = [rec(0, "write", "a", f"f{i}", 100 * MIB) for i in range(4)] + \
           [rec(500, "write", "a", "g", 100 * MIB)]
    sc = load_scenario(make_scenario(cluster(), recs))
    from lustre_alloc.simulator.report import summarise
    s = summarise(run_policy(sc, prepare(sc), "round_robin"))
    assert s["jobs"] == 1 and s["phases"] == 2                    # two phases 500 s apart
    assert s["job_io_time_s_mean"] == pytest.approx(501.0)
    assert s["phase_io_time_s_p99"] == pytest.approx(1.0)
    assert (s["slowest_job"], s["slowest_job_io_time_s"]) == ("a", 501.0)
    assert s["file_write_s_p50"] == pytest.approx(1.0)
    assert s["job_slowdown_mean"] == pytest.approx(1.0)


def test_cli_validate_rejects_a_bad_event_in_one_line(make_scenario, capsys):
    from lustre_alloc.simulator.cli import main
    p = make_scenario(cluster(extra='\n[[event]]\nkind = "degrade"\nat_s = 1\noss = 7\nfraction = 0.3\n'),
                      [rec(0, "write", "a", "f", MIB)])
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "event[0].oss: OSS 7 out of range" in err


def test_repeated_workload_replays_at_each_offset_with_its_own_job_and_files(make_scenario):
    # Regression: replays were all generated lazily with the last k (same time, job, files).
    wl = '\n[[workload]]\ntrace = "t.csv"\nrepeat_every_s = 100\n'
    sc = load_scenario(make_scenario(cluster(duration=350, workloads=wl),
                                     [rec(0, "write", "a", "f", MIB), rec(5, "delete", "a", "f")]))
    recs = list(scenario_records(sc))
    assert [(r.timestamp_s, r.jobid, r.file_id) for r in recs if r.op == "write"] == [
        (0.0, "a#0", "r0/f"), (100.0, "a#1", "r1/f"), (200.0, "a#2", "r2/f"), (300.0, "a#3", "r3/f")]


def test_a_shorter_duration_drops_the_later_events(make_scenario):
    extra = '\n[[event]]\nkind = "degrade"\nat_s = 3000\nost = 1\nfraction = 0.5\n'
    sc = load_scenario(make_scenario(cluster(extra=extra), [rec(0, "write", "a", "f", MIB)]))
    assert len(sc.events) == 1 and sc.with_overrides(duration_s=1000).events == ()
