"""Broker in-process: last-value cache for late joiners, gap detection, duplicates, CURVE."""
from __future__ import annotations


import pytest
import zmq

from lustre_alloc.collectors.broker import Broker
from lustre_alloc.common.curve import CurveClient, CurveServer, generate_keys
from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.collectors.subscriber import Subscriber
from tests.support import join, wait_for

LOCAL = "tcp://127.0.0.1:*"
BODY = {"server": {"values": {"cpu_percent": 1.0}, "unavailable": {}}, "targets": {}}


@pytest.fixture
def ctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def broker():
    b = Broker(LOCAL, LOCAL, LOCAL, heartbeat_s=0.1).start()
    yield b
    b.stop()


def test_late_joiner_gets_last_value_of_every_server_at_once(broker, ctx):
    pubs = [Publisher(broker.endpoints.frontend, "oss", f"oss{i}", context=ctx) for i in range(3)]
    assert wait_for(lambda: [p.publish(1.0, 5.0, BODY) for p in pubs] and
                    len(broker.cached_topics()) == 3)
    for p in pubs:
        p.publish(2.0, 5.0, BODY)  # the cache keeps the last one

    def late_joiner() -> list | None:
        with Subscriber(broker.endpoints.backend, broker.endpoints.snapshot, context=ctx) as sub:
            got = [sub.recv(1.0) for _ in range(3)]
        return got if all(s is not None and s.time == 2.0 for s in got) else None
    got = wait_for(late_joiner, what="the cache holding every server's last sample")
    assert sorted(s.host for s in got) == ["oss0", "oss1", "oss2"]
    assert all(s.from_cache and s.time == 2.0 for s in got)
    for p in pubs:
        p.close()


def test_subscriber_reports_gap_and_drops_duplicates(broker, ctx):
    with Subscriber(broker.endpoints.backend, broker.endpoints.snapshot, context=ctx) as sub:
        pub = Publisher(broker.endpoints.frontend, "oss", "ossA", context=ctx, compress=True)
        base = join(lambda: pub.publish(0.5, 5.0, BODY), sub.recv).seq
        pub.publish(1.0, 5.0, BODY)
        pub.skip(2)
        pub.publish(2.0, 5.0, BODY)
        got = [sub.recv(2.0), sub.recv(2.0)]
        assert [s.seq for s in got] == [base + 1, base + 4]
        assert (len(sub.gaps) == 1 and sub.gaps[0].expected_seq == base + 2
                and sub.gaps[0].missing == 2)
        sub.fetch_snapshot()  # the cached seq 4 again: a duplicate
        assert sub.recv(0.3) is None and sub.duplicates == 1
        pub.close()


def test_new_publisher_epoch_is_not_a_gap(broker, ctx):
    with Subscriber(broker.endpoints.backend, None, context=ctx) as sub:
        for _ in range(2):
            pub = Publisher(broker.endpoints.frontend, "mds", "mds1", context=ctx)
            base = join(lambda: pub.publish(0.5, 5.0, BODY), sub.recv).seq
            pub.publish(1.0, 5.0, BODY)
            assert sub.recv(2.0).seq == base + 1
            pub.close()
        assert sub.gaps == []


def test_bind_conflict_raises(broker):
    other = Broker(broker.endpoints.frontend, LOCAL, LOCAL)
    with pytest.raises(zmq.ZMQError):
        other.start()
    other.stop()


@pytest.fixture
def keys(tmp_path):
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    generate_keys(tmp_path, "broker")
    for name in ("oss1", "mapper"):
        public, _ = generate_keys(tmp_path, name)
        (authorized / public.name).write_bytes(public.read_bytes())
    generate_keys(tmp_path, "intruder")  # valid keys, not authorised
    return tmp_path


def test_curve_rejects_unauthenticated_and_unknown_publishers(keys, ctx):
    server = CurveServer(str(keys / "broker.key_secret"), str(keys / "authorized"))
    client = lambda name: CurveClient(str(keys / f"{name}.key_secret"), str(keys / "broker.key"))
    b = Broker(LOCAL, LOCAL, LOCAL, curve=server, heartbeat_s=0.1).start()
    try:
        sub = Subscriber(b.endpoints.backend, b.endpoints.snapshot, curve=client("mapper"),
                         context=ctx).start()
        good = Publisher(b.endpoints.frontend, "oss", "oss1", curve=client("oss1"), context=ctx)
        plain = Publisher(b.endpoints.frontend, "oss", "plain", context=ctx)
        intruder = Publisher(b.endpoints.frontend, "oss", "intruder", curve=client("intruder"),
                             context=ctx)
        hosts = set()

        def round_of_three() -> None:
            for p in (good, plain, intruder):
                p.publish(1.0, 5.0, BODY)
        hosts.add(join(round_of_three, sub.recv, what="the authorised publisher's sample").host)
        for _ in range(10):           # the others, connected as long, still get nothing through
            round_of_three()
            while (sample := sub.recv(0.1)) is not None:
                hosts.add(sample.host)
        assert hosts == {"oss1"}
        assert b.cached_topics() == [b"lustre-alloc.v1.oss.oss1"]
        # an unauthenticated subscriber gets nothing either
        nosub = Subscriber(b.endpoints.backend, b.endpoints.snapshot, context=ctx,
                           snapshot_timeout_s=0.5).start()
        assert nosub.recv(0.5) is None
        for s in (nosub, sub):
            s.close()
        for p in (good, plain, intruder):
            p.close()
    finally:
        b.stop()


def test_a_rejected_collector_says_so(keys, ctx, caplog):
    """The broker drops an unauthorised key in the handshake; the collector's publisher sees
    it on its socket monitor, logs it once and counts it."""
    import logging
    server = CurveServer(str(keys / "broker.key_secret"), str(keys / "authorized"))
    b = Broker(LOCAL, LOCAL, LOCAL, curve=server, heartbeat_s=0.1).start()
    try:
        intruder = Publisher(b.endpoints.frontend, "oss", "intruder", context=ctx,
                             curve=CurveClient(str(keys / "intruder.key_secret"),
                                               str(keys / "broker.key")))
        good = Publisher(b.endpoints.frontend, "oss", "oss1", context=ctx,
                         curve=CurveClient(str(keys / "oss1.key_secret"), str(keys / "broker.key")))
        with caplog.at_level(logging.INFO, logger="lustre_alloc.collectors.publisher"):
            wait_for(lambda: good.poll_auth() or intruder.poll_auth() or intruder.rejected,
                     what="the broker rejecting the intruder")
            intruder.poll_auth()                       # read again: still one log line
        assert intruder.rejected >= 1 and good.rejected == 0
        events = [r.event for r in caplog.records if hasattr(r, "event")]
        assert events.count("broker_rejected") == 1
        intruder.close()
        good.close()
    finally:
        b.stop()
