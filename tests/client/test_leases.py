"""The shim's leases (protocol v2), with real programs under LD_PRELOAD against a
real mapper: creates take leased layouts without a round trip each, what a process holds
goes back at exit, a fork child never reuses its parent's layouts, a v1 mapper is asked per
create, and a mapper killed with leases outstanding fails no create."""
from __future__ import annotations

import sys
import threading
import time
from collections import Counter

import pytest

from tests.service.conftest import make_service

from tests.service.test_mds_view import fed_by_mds, mds_body
from tests.support import wait_for

from .conftest import N_OSTS, assert_valid_layout

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def mapper():
    svc = make_service(static_cluster="4x2", policy="round_robin", layout_lease_s=5.0)
    yield svc
    svc.stop()


def _count(svc, metric: str, label: str) -> float:
    return getattr(svc.metrics, metric).labels(label)._value.get()


def test_creates_take_leased_layouts_and_everything_held_goes_back_at_exit(
        shim_run_factory, mapper, create_files):
    run = shim_run_factory(mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    p = run.run([create_files, "-n", "400", run.data])
    assert "created=400" in p.stdout
    recs = run.records()
    assert len(recs) == 400
    for r in recs:
        assert_valid_layout(r)
        assert r["lease"] and r["policy"] == "round_robin"
    leases = Counter(r["lease"] for r in recs)
    asked = _count(mapper, "requests", "lease")
    # a lease request per many creates (4 at first, then 100 ms of this process's rate)
    # (the last refill may come as the process ends, and go back unused)
    assert len(leases) <= _count(mapper, "leases", "granted") <= asked < 400 / 4
    assert _count(mapper, "requests", "ok") == 0                  # no per-create request
    # at exit the process returned what it held (the last release may still be on its
    # way when the process is gone): nothing waits for the lifetime
    wait_for(lambda: _count(mapper, "leases", "released") == _count(mapper, "leases",
                                                                    "granted"),
             timeout_s=2.0, what="every lease released")
    assert _count(mapper, "leases", "expired") == 0
    assert _count(mapper, "leased_layouts", "used") == 400
    assert (_count(mapper, "leased_layouts", "used") + _count(mapper, "leased_layouts",
                                                              "released")
            == _count(mapper, "leased_layouts", "granted"))
    assert len(mapper.leases.book) == 0
    # the layouts walk the OSTs as round-robin's per-create answers do
    per_ost = Counter(int(r["osts"]) for r in recs)
    assert sorted(per_ost) == list(range(N_OSTS)) and max(per_ost.values()) <= 400 / N_OSTS + 4


def test_threads_share_a_class_without_using_a_layout_twice(shim_run_factory, mapper,
                                                             create_files):
    run = shim_run_factory(mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    p = run.run([create_files, "-t", "8", "-n", "250", run.data])
    assert "created=2000" in p.stdout
    recs = run.records()
    assert all(r["result"] == "layout" and r["lease"] for r in recs)
    used = Counter(r["lease"] for r in recs)
    # no lease gave more layouts than it held (none was handed to two creates)
    assert _count(mapper, "leased_layouts", "used") == 2000
    assert sum(used.values()) == 2000 <= _count(mapper, "leased_layouts", "granted")


def test_a_fork_child_never_uses_its_parents_layouts(shim_run_factory, mapper, create_files):
    run = shim_run_factory(mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    p = run.run([create_files, "-f", "-n", "20", run.data])
    assert p.returncode == 0, p.stdout + p.stderr
    recs = run.records()
    leases = {"parent": set(), "child": set()}
    for r in recs:
        assert r["result"] == "layout" and r["lease"], r
        leases["child" if "child" in r["path"] else "parent"].add(r["lease"])
    assert len(recs) == 41 and leases["child"]
    assert not leases["parent"] & leases["child"]          # the child leased its own


def test_a_v1_mapper_is_asked_per_create(shim_run_factory, standin, create_files):
    m = standin("normal")
    run = shim_run_factory(m.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    p = run.run([create_files, "-n", "30", run.data])
    assert "created=30" in p.stdout
    recs = run.records()
    for r in recs:
        assert_valid_layout(r)
        assert r["lease"] == "" and r["policy"] == "standin_rr"


def test_lease_off_asks_per_create(shim_run_factory, mapper, create_files):
    run = shim_run_factory(mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_LEASE="0")
    p = run.run([create_files, "-n", "20", run.data])
    assert "created=20" in p.stdout
    assert all(r["lease"] == "" and r["result"] == "layout" for r in run.records())
    assert _count(mapper, "requests", "ok") == 20 and _count(mapper, "requests", "lease") == 0


def test_mapper_killed_with_leases_outstanding_fails_no_create(shim_run_factory, create_files):
    svc = make_service(static_cluster="4x2", policy="round_robin")
    run = shim_run_factory(svc.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="50")
    killer = threading.Timer(0.3, svc.stop)
    killer.start()
    try:
        p = run.run([create_files, "-t", "2", "-n", "20000", run.data], timeout=110)
    finally:
        killer.join()
        svc.stop()
    assert "created=40000" in p.stdout, p.stdout + p.stderr
    recs = run.records()
    results = Counter((r["result"], r["reason"].split(":")[0]) for r in recs)
    assert len(recs) == 40000
    assert results[("layout", "")] > 0                           # leased before the kill
    # after it: Lustre's allocator, for the reasons a per-create shim gives
    # (lease_timeout: a lease request in flight when the mapper went, la_lease.c)
    assert set(results) <= {("layout", ""), ("default", "mapper_timeout"),
                            ("default", "mapper_unreachable"), ("default", "mapper_backoff"),
                            ("default", "lease_timeout")}


def test_an_ost_made_inactive_leaves_the_leases_at_the_next_refill(shim_run_factory,
                                                                    create_files):
    """The MDS marks OST 3 inactive while a process creates steadily: the next lease reply
    revokes the leases holding it and hands out none with it; the creates that used a
    layout with OST 3 after it went inactive (on Lustre: refused by the MDS, so Lustre's
    allocator) are counted and bounded by one refill."""
    inactive: set[int] = set()
    stop = threading.Event()
    flipped: list[float] = []

    def flip():
        inactive.add(3)
        flipped.append(time.time())
    with fed_by_mds() as (svc, publish):
        def feed():
            while not stop.is_set():
                publish(mds_body(inactive=set(inactive)))
                stop.wait(0.05)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            wait_for(lambda: svc.store.ost_count == 4, timeout_s=10, what="state")
            run = shim_run_factory(svc.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
            script = ("import sys, time\n"
                      "for i in range(400):\n"
                      "    open(f'{sys.argv[1]}/f{i}', 'w').close()\n"
                      "    time.sleep(0.004)\n")
            timer = threading.Timer(0.8, flip)
            timer.start()
            run.run([sys.executable, "-c", script, run.data], timeout=60)
            timer.join()
        finally:
            stop.set()
            feeder.join()
        revoked = _count(svc, "leases", "revoked")
    recs = run.records()
    assert len(recs) == 400 and all(r["result"] == "layout" for r in recs)
    on_3 = [float(r["ts"]) for r in recs if r["osts"] == "3"]
    late = [t - flipped[0] for t in on_3 if t > flipped[0]]
    assert on_3 and min(on_3) < flipped[0]              # used while it was active
    assert revoked >= 1
    # after the MDS sample: at most what was taken before the next refill's reply
    print(f"creates on OST 3 after it went inactive: {len(late)}, the last "
          f"{max(late, default=0):.3f} s after")
    assert len(late) <= 60 and max(late, default=0) < 1.0


def test_stripe_counters_count_files_created_not_layouts_leased(shim_run_factory, mapper,
                                                                create_files):
    """30 one-file processes under leases: each leases several layouts and uses one. The
    per-OST stripe counters equal the files created (a leased layout counts when the shim
    says it used it), not the layouts granted."""
    run = shim_run_factory(mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    for i in range(30):
        p = run.run([create_files, "-n", "1", "-p", f"p{i}-", run.data])
        assert "created=1" in p.stdout
    wait_for(lambda: _count(mapper, "leases", "released") == _count(mapper, "leases",
                                                                    "granted"),
             timeout_s=5.0, what="every lease released")
    granted = _count(mapper, "leased_layouts", "granted")
    stripes = sum(mapper.metrics.stripes[mapper.only().fsname].values())
    assert len(run.records()) == 30 and granted > 30      # several layouts per lease
    assert stripes == 30                                  # one stripe per file created
    # the decision log and explain know each file by its own path, with the leased
    # layout it got (the shim names the files in its releases)
    assert mapper.desk.log.written + mapper.desk.log.suppressed == 30   # 1 line/s written
    for r in run.records():
        found = mapper.desk.explain(path=r["path"])
        assert found is not None and found["mode"] == "place"
        assert found["osts"] == assert_valid_layout(r)


@pytest.mark.parametrize("lease, reason", [("0", "mapper_socket"), ("1", "lease_send")])
def test_a_mapper_address_without_its_scheme_fails_to_lustre_with_the_documented_reason(
        shim_run_factory, create_files, lease, reason):
    """``LUSTRE_ALLOC_MAPPER=mds01:5558`` (no ``tcp://``): every create still succeeds, on
    Lustre's allocator, recorded with the reason docs/client.md's failure table gives."""
    run = shim_run_factory("127.0.0.1:5558", LUSTRE_ALLOC_LEASE=lease)
    p = run.run([create_files, "-n", "3", run.data])
    assert "created=3" in p.stdout
    assert {(r["result"], r["reason"].split(":")[0]) for r in run.records()} == \
        {("default", reason)}


def _shim_env(tmp_path, endpoint: str):
    """A data directory the shim places in, its record file, and the environment of a
    program run under the shim against ``endpoint``."""
    import os

    from .conftest import LIBDIR

    data, record = tmp_path / "d", tmp_path / "record"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.update(LD_PRELOAD=str(LIBDIR / "liblustre_alloc.so"), LUSTRE_ALLOC_MAPPER=endpoint,
               LUSTRE_ALLOC_PATHS=str(data), LUSTRE_ALLOC_RECORD=str(record),
               LUSTRE_ALLOC_TIMEOUT_MS="5000")
    return data, record, env


def test_concurrent_processes_taking_leases_spread_over_every_ost(tmp_path):
    """Each process uses a prefix of its leases; unrotated, leases of consecutive
    round-robin windows started every process on the same OSTs (on Lustre 2.17.0, 4
    processes x 6 creates left one of 4 OSTs without a file; here 8/4/4/8). Rotated by the
    lease id, the creates spread as Lustre's round-robin spreads them."""
    import subprocess
    import sys
    from collections import Counter

    from ..service.conftest import make_service
    from .conftest import parse_records

    svc = make_service(static_cluster="1x4", policy="mcmf",
                       policy_params={"mcmf": {"alike_to_lustre": False}})
    try:
        data, record, env = _shim_env(tmp_path, svc.endpoint)
        code = ("import sys\nfor i in range(6):\n"
                "    open(f'{sys.argv[1]}/{sys.argv[2]}-{i}', 'wb').write(b'x')\n")
        procs = [subprocess.Popen([sys.executable, "-c", code, str(data), f"w{w}"], env=env)
                 for w in range(4)]
        assert all(p.wait(60) == 0 for p in procs)
        per_ost = Counter(r["osts"] for r in parse_records(record))
        assert sum(per_ost.values()) == 24 and set(per_ost) == {"0", "1", "2", "3"}
        assert max(per_ost.values()) - min(per_ost.values()) <= 2, per_ost
    finally:
        svc.stop()


def test_a_lease_wider_than_its_class_is_refused_like_a_per_create_reply(tmp_path):
    """A 1-stripe create leased a 2-OST list got 2 stripes (seen on Lustre 2.17.0), where a
    per-create reply that wide is refused (mapper_garbage:osts_count)."""
    import os
    import subprocess
    import sys

    from lustre_alloc.selftest.responder import ListResponder

    from .conftest import LIBDIR, parse_records

    data, record = tmp_path / "d", tmp_path / "record"
    data.mkdir()
    with ListResponder() as mapper:
        mapper.answer_with([1, 2])
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
        env.update(LD_PRELOAD=str(LIBDIR / "liblustre_alloc.so"),
                   LUSTRE_ALLOC_MAPPER=mapper.endpoint, LUSTRE_ALLOC_PATHS=str(data),
                   LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS="5000",
                   LUSTRE_ALLOC_STRIPE_COUNT="1")
        code = f"open('{data}/f', 'wb').write(b'x')"
        assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0
        assert any(a.op == "lease" for a in mapper.asked)
    (rec,) = parse_records(record)
    assert rec["result"] == "default" and rec["osts"] == "", rec


def test_a_writer_slower_than_its_leases_live_finds_a_fresh_layout_at_each_create(tmp_path):
    """A process creating a file every 0.6 s, under leases that live 0.5 s (used for 0.4 s)
    from a mapper that answers each lease 0.1 s late: its layouts expire between creates.
    Before the refresh every create found its class expired, waited a round trip, and asked
    twice the last grant (on Lustre 2.17.0 in the lustre-vm guest: 118 leases for 120
    creates, 0.42 s median wait, grants growing to 256 layouts with one used of each). Now the
    helper refreshes the class a little before its newest layout expires: after the first
    creates none waits for the mapper, and each refresh is sized by the class's rate (one
    layout), not doubled."""
    import subprocess
    import sys

    from ..service.conftest import make_service
    from .conftest import parse_records

    delay_s, files = 0.1, 10
    svc = make_service(static_cluster="1x4", policy="round_robin", layout_lease_s=0.5)
    grant = svc.leases.grant

    def late_grant(ctx, group):
        time.sleep(delay_s)              # the mapper's round trip on a loaded MDS
        return grant(ctx, group)

    svc.leases.grant = late_grant
    try:
        data, record, env = _shim_env(tmp_path, svc.endpoint)
        # the writer's pace is the workload, not a wait for an event
        code = ("import sys, time\nfor i in range(int(sys.argv[2])):\n"
                "    open(f'{sys.argv[1]}/f{i}', 'wb').write(b'x')\n    time.sleep(0.6)\n")
        assert subprocess.run([sys.executable, "-c", code, str(data), str(files)], env=env,
                              timeout=60).returncode == 0
        recs = parse_records(record)
        assert len(recs) == files and all(r["lease"] for r in recs)
        # a create that waited for a lease waited for its reply, which the mapper sent
        # delay_s late: the first creates do (the class has no pace yet), the rest do not
        waited = [float(r["mapper_us"]) >= delay_s * 1e6 for r in recs]
        assert waited[0] and sum(waited[3:]) <= 1, [r["mapper_us"] for r in recs]
        # one layout per refresh (its rate), plus the first lease's 16: never doubled
        granted = _count(svc, "leased_layouts", "granted")
        assert granted <= 16 + 3 * files, granted
    finally:
        svc.stop()


def test_slow_writers_refills_ask_for_their_rate_not_a_burst(tmp_path):
    """4 writers, each creating a file every 0.8-2.2 s, under leases used for 1.6 s:
    each refill after the first needs 1-3 layouts (its rate over the use window). A refill
    asked just after another (the low-water mark of a 2-layout lease, right after a
    refresh) saw one create within a few ms and read a burst: on the host such writers
    asked for 37-50 layouts, then 16 at every refill, one used of each. The rate is now one
    over the mean gap between the class's creates."""
    import subprocess
    import sys

    from ..service.conftest import make_service
    from .conftest import parse_records

    svc = make_service(static_cluster="1x4", policy="round_robin", layout_lease_s=2.0)
    grant, asked = svc.leases.grant, []

    def counting_grant(ctx, group):
        asked.extend(req.lease_count for _, req, _ in group)
        return grant(ctx, group)

    svc.leases.grant = counting_grant
    try:
        data, record, env = _shim_env(tmp_path, svc.endpoint)
        # the writers' pace is the workload, not a wait for an event
        code = ("import sys, time\ngaps = [0.8, 2.2, 0.9, 2.0, 0.8, 1.5]\n"
                "k = int(sys.argv[2])\nfor i in range(6):\n"
                "    open(f'{sys.argv[1]}/w{k}-{i}', 'wb').write(b'x')\n"
                "    time.sleep(gaps[(i + k) % 6])\n")
        procs = [subprocess.Popen([sys.executable, "-c", code, str(data), str(k)], env=env)
                 for k in range(4)]
        assert all(p.wait(60) == 0 for p in procs)
        assert len(parse_records(record)) == 24
        firsts = sorted(asked)[-4:]
        assert firsts == [16] * 4 and sorted(asked)[-5] <= 6, asked
    finally:
        svc.stop()
