"""Leases in the simulator: ``<policy>+lease`` runs the policy behind
the shim's leases (a batch decided ahead per class, used until 80% of the lifetime,
un-booked when it expires or names an OST that became unusable), with the shim's and the
mapper's own constants."""
from __future__ import annotations

import dataclasses
import re

import pytest

from lustre_alloc.mapper.policies.placement import BatchPolicy, CreateRequest, Placement
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
from lustre_alloc.simulator import leasing
from lustre_alloc.simulator.leasing import LeasedCreates
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario

from .conftest import rec, small
from ..client.conftest import LIBDIR

MIB = 1 << 20


class Booking(BatchPolicy):
    """Round-robin over the usable OSTs that keeps books: what it handed out, minus what
    came back."""
    name = "booking"

    def __init__(self):
        self.next = 0
        self.batches: list[int] = []
        self.booked: dict[int, float] = {}

    def allocate_batch(self, snapshot, requests):
        self.batches.append(len(requests))
        out = []
        usable = [o.index for o in snapshot.osts if o.active]
        for r in requests:
            osts = tuple(usable[(self.next + i) % len(usable)] for i in range(r.stripe_count))
            self.next += r.stripe_count
            for o in osts:
                self.booked[o] = self.booked.get(o, 0.0) + MIB
            out.append(Placement(osts, self.name))
        return out

    def book_observed(self, snapshot, osts, bytes_per_stripe, jobid):
        pass

    def predicted_load(self):
        return dict(self.booked)

    def unbook(self, osts, bytes_per_stripe):
        for o in osts:
            self.booked[o] -= bytes_per_stripe


def _snap(t: float, inactive=()):
    snap = make_uniform_cluster(4, 2, 1 << 32)
    snap.time_s = t
    snap.osts = [dataclasses.replace(o, active=o.index not in inactive) for o in snap.osts]
    return snap


REQ = CreateRequest("app.1", 2, MIB)


def test_creates_take_layouts_decided_ahead_in_one_batch_refilled_at_half():
    pol = Booking()
    leased = LeasedCreates(pol)
    got = [leased.allocate(_snap(0.1 * i), REQ) for i in range(9)]
    # the first create asks for 16 in one round; the 9th finds 8 left (half): refill,
    # 100 ms of 10 creates a second is under the minimum: 16 again
    assert pol.batches == [16, 16] and all(p.note == "leased" for p in got)
    assert got[0].osts == (0, 1) and got[1].osts == (2, 3)      # in the order decided
    assert leased.stats["taken"] == 9 and leased.stats["granted"] == 32
    assert sum(pol.booked.values()) == 32 * 2 * MIB               # every layout booked


def test_expired_layouts_come_off_the_books_and_are_never_used():
    pol = Booking()
    leased = LeasedCreates(pol)
    first = leased.allocate(_snap(0.0), REQ)
    # past 80% of the 2 s lifetime: the 15 left are un-booked, and the create that found
    # its class dry by expiry (no burst used it up) asks for what its rate uses within a
    # use window: one layout, not twice the last grant (that grew a slow writer's every
    # lease to 256 in the shim, one used of each)
    later = leased.allocate(_snap(1.7), REQ)
    assert leased.stats["expired"] == 15 and pol.batches == [16, 1]
    assert first.osts == (0, 1) and later.osts == pol_osts_of(16 * 2)   # the new lease's
    assert [len(c.held) for c in leased.classes.values()] == [0]
    assert sum(pol.booked.values()) == pytest.approx((1 + 1) * 2 * MIB)


def test_a_bursts_refill_asks_for_100_ms_of_its_rate_beyond_the_minimum():
    pol = Booking()
    leased = LeasedCreates(pol)
    for i in range(16):             # 16 creates within 16 ms use the first lease up
        leased.allocate(_snap(0.001 * i), REQ)
    assert pol.batches[0] == 16 and pol.batches[1] >= 16


def pol_osts_of(n: int) -> tuple[int, int]:
    """The layout round-robin decides after ``n`` stripes on 8 OSTs."""
    return (n % 8, (n + 1) % 8)


def test_a_layout_naming_an_ost_that_became_unusable_is_dropped_and_unbooked():
    pol = Booking()
    leased = LeasedCreates(pol)
    leased.allocate(_snap(0.0), REQ)
    nxt = leased.allocate(_snap(0.1, inactive={3}), REQ)
    assert 3 not in nxt.osts and leased.stats["revoked"] >= 1
    assert pol.booked.get(3, 0.0) == 0.0         # what named OST 3 came back


def test_wide_layouts_are_asked_per_create_and_the_sizing_follows_the_rate():
    pol = Booking()
    leased = LeasedCreates(pol)
    leased.allocate(_snap(0.0), CreateRequest("app.1", -1, MIB))
    assert leased.stats["per_create"] == 1 and pol.batches == [1]
    # 1000 creates a second: a refill asks for 100 ms of them
    for i in range(400):
        leased.allocate(_snap(0.001 * i + 1.0), REQ)
    assert max(pol.batches) >= 64 and max(pol.batches) <= leasing.ASK_MAX


class Alike(Booking):
    """:class:`Booking` that leaves every class to Lustre while ``alike``."""
    alike = True

    def leaves_to_lustre(self, snapshot, request):
        return "regime round_robin" if self.alike else ""


def test_a_class_left_to_lustre_is_placed_by_the_fallback_until_a_grant():
    """The lease desk's ``allocator: "lustre"`` answer: the class's creates go to the
    gate's fallback (the simulator's Lustre allocator) for one lifetime, nothing booked;
    when it is over the next create is still Lustre's while the class asks again, and a
    grant ends it (``la_lease.c``, ``LA_NOLEASE_TO_LUSTRE``)."""
    from lustre_alloc.mapper.policies.gate import GatedPolicy
    from lustre_alloc.mapper.policies.round_robin import RoundRobin
    primary = Alike()
    leased = LeasedCreates(GatedPolicy(primary, RoundRobin()))
    assert leased.lifetime_s == leasing.LEASE_S
    got = [leased.allocate(_snap(0.1 * i), REQ) for i in range(30)]        # 0 .. 2.9 s
    assert {p.note for p in got} == {"lustre allocator"}
    assert leased.stats["leases"] == 2 and leased.stats["to_lustre"] == 30
    assert primary.batches == [] and sum(primary.booked.values()) == 0
    primary.alike = False
    later = [leased.allocate(_snap(3.0 + 0.1 * i), REQ) for i in range(12)]  # 3.0 .. 4.1 s
    # until 4.0 s still Lustre's; the create at 4.0 s asks (a grant) and is Lustre's too
    assert [p.note for p in later] == ["lustre allocator"] * 11 + ["leased"]
    assert primary.batches == [16]


def test_the_constants_are_the_shims_and_the_mappers():
    lease_c = (LIBDIR / "la_lease.c").read_text()
    internal = (LIBDIR / "la_internal.h").read_text()

    def define(text: str, name: str) -> float:
        return float(re.search(rf"#define {name}\s+([0-9.]+)", text).group(1))

    assert define(lease_c, "LA_ASK_MIN") == leasing.ASK_MIN
    assert define(lease_c, "LA_ASK_HORIZON_S") == leasing.ASK_HORIZON_S
    assert define(lease_c, "LA_USE_FRACTION") == leasing.USE_FRACTION
    assert define(internal, "LA_LEASE_ASK_MAX") == leasing.ASK_MAX
    assert define(internal, "LA_LEASE_MAX_STRIPES") == leasing.MAX_STRIPES
    from lustre_alloc.mapper.service.config import MapperConfig
    assert MapperConfig().layout_lease_s == leasing.LEASE_S
    assert MapperConfig().lease_max_layouts == leasing.ASK_MAX


def test_a_run_behind_leases_places_every_file_and_names_its_rows(make_scenario):
    records = [rec(t, "write", "a", f"f{t}", 10 * MIB, sc=2) for t in range(0, 300, 3)]
    body = small(duration=400, policies='["mcmf", "mcmf+lease"]')
    sc = load_scenario(make_scenario(body, records))
    plain, lease = (run_policy(sc, prepare(sc), p) for p in sc.policies)
    assert plain.counters["creates"] == lease.counters["creates"] == 100
    # mcmf leaves a class to Lustre's allocator while the world's OSTs look alike
    assert lease.notes["leased"] + lease.notes.get("lustre allocator", 0) == 100
    assert "leased" not in plain.notes
    assert lease.policy == "mcmf+lease"
    with pytest.raises(ScenarioError, match="unknown policy 'oracle\\+lease'"):
        load_scenario(make_scenario(small(policies='["oracle+lease"]'), records))
