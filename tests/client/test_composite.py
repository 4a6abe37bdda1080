"""Composite (PFL) directory defaults under the shim, with real programs
under LD_PRELOAD against a real mapper: every OST component of a file gets its OSTs from the
mapper in one request, a Data-on-MDT component and a self-extending extension are kept as
the directory had them, and what the shim cannot place (FLR mirrors, a v1 mapper) is left to
Lustre's allocator with the reason in the record. The bytes the shim hands to
``LL_IOC_LOV_SETSTRIPE`` are checked at the ioctl seam (liblustre_alloc/tests/test_pfl.c)."""
from __future__ import annotations

import json
import struct
import subprocess

import pytest

from lustre_alloc.mapper.service.wire import decode_request
from lustre_alloc.mapper.service.wire import LUSTRE_EOF, encode_composite
from tests.service.conftest import make_service

from .conftest import LIBDIR, N_OSTS
from .test_shim_safety import set_dir_default

pytestmark = pytest.mark.timeout(120)
MIB, GIB = 1 << 20, 1 << 30
PROG = LIBDIR / "tests" / "test_pfl"

# lustre_user.h values, restated in docs/reference/lustre-client-layout-api.md
LOV_USER_MAGIC_V1, LOV_USER_MAGIC_V3, LOV_USER_MAGIC_COMP_V1 = 0x0BD10BD0, 0x0BD30BD0, 0x0BD60BD0
LOV_PATTERN_RAID0, LOV_PATTERN_MDT, LCME_FL_EXTENSION = 0x1, 0x100, 0x40


def pfl_default(comps: list[tuple], mirrors: int = 0) -> bytes:
    """A directory's composite default as GETSTRIPE gives it: ``comps`` are (start, end,
    stripe_count, stripe_size, pool, pattern, flags); a 32-byte header, 48-byte entries,
    then one v1 (no pool) or v3 blob each ("Composite layouts (PFL)")."""
    table = 32 + 48 * len(comps)
    entries, blobs = b"", b""
    for start, end, count, size, pool, pattern, flags in comps:
        if pool:
            blob = struct.pack("<IIQQIHH16s", LOV_USER_MAGIC_V3, pattern, 0, 0, size,
                               count & 0xFFFF, 0xFFFF, pool.encode())
        else:
            blob = struct.pack("<IIQQIHH", LOV_USER_MAGIC_V1, pattern, 0, 0, size,
                               count & 0xFFFF, 0xFFFF)
        entries += struct.pack("<IIQQIIIQI", 0, flags, start, end, table + len(blobs),
                               len(blob), 0, 0, 0)
        blobs += blob
    header = struct.pack("<IIIHHH6sQ", LOV_USER_MAGIC_COMP_V1, table + len(blobs), 0, 0,
                         len(comps), mirrors, b"", 0)
    return header + entries + blobs


def ost(start, end, count, size=MIB, pool=""):
    return (start, end, count, size, pool, LOV_PATTERN_RAID0, 0)


# lfs setstripe -E 1M -c 1 -E 1G -c 4 -E -1 -c -1 DIR
THREE = [ost(0, MIB, 1), ost(MIB, GIB, 4), ost(GIB, LUSTRE_EOF, -1)]
# lfs setstripe -E 64K -L mdt -E 1G -c 2 -S 4M -E 4G -c 1 -z 256M -E -1 -c 2 DIR
DOM_SEL = [(0, 65536, 0, 65536, "", LOV_PATTERN_MDT, 0), ost(65536, GIB, 2, 4 * MIB),
           ost(GIB, 2 * GIB, 1), (2 * GIB, 4 * GIB, 1, MIB, "", LOV_PATTERN_RAID0,
                                  LCME_FL_EXTENSION),
           ost(4 * GIB, LUSTRE_EOF, 2)]


@pytest.fixture
def mcmf():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False)
    yield svc
    svc.stop()


def _lists(rec: dict[str, str]) -> list[list[int] | str]:
    return [[int(x) for x in part.split(",")] if part[:1].isdigit() else part
            for part in rec["osts"].split(";")]


def test_by_default_only_the_first_component_is_placed_and_the_rest_left_to_lustre(
        shim_run_factory, mcmf, create_files):
    """Components after the first are instantiated when I/O reaches them (lod_qos.c
    lod_qos_prep_create()), by then a list named now may be refused: Lustre places them."""
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    set_dir_default(run.data, pfl_default(THREE))
    run.run([create_files, "-n", "3", run.data])
    recs = run.records()
    assert len(recs) == 3
    for r in recs:
        assert r["result"] == "layout" and r["reason"] == "", r
        lists = _lists(r)
        assert len(lists[0]) == 1 and lists[1:] == ["keep", "keep"], r


def test_every_ost_component_of_a_pfl_default_gets_its_osts_from_the_mapper(
        shim_run_factory, mcmf, create_files):
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_EXPECTED_BYTES=str(4 * GIB),
                           LUSTRE_ALLOC_PFL_ALL="1")
    set_dir_default(run.data, pfl_default(THREE))
    p = run.run([create_files, "-n", "5", run.data])
    assert "created=5" in p.stdout
    recs = run.records()
    assert len(recs) == 5
    for r in recs:
        assert r["result"] == "layout" and r["reason"] == "" and r["policy"] == "mcmf", r
        assert r["extents"] == f"0-{MIB};{MIB}-{GIB};{GIB}-eof"
        lists = _lists(r)
        assert [len(x) for x in lists] == [1, 4, N_OSTS]
        assert all(len(set(x)) == len(x) and all(0 <= o < N_OSTS for o in x) for x in lists)
        assert r["stripe_count"] == f"1;4;{N_OSTS}" and r["req_count"] == "1;4;-1"
        assert r["stripe_size"] == f"{MIB};{MIB};{MIB}"
    # one request per file, each component booked with its share of the 4 GiB
    assert mcmf.metrics.requests.labels("ok")._value.get() == 5
    with mcmf.lock:
        assert sum(mcmf.policy.primary.pending.bytes_by_ost().values()) == \
            pytest.approx(5 * 4 * GIB)


def test_dom_components_are_kept_and_only_ost_components_are_asked(
        shim_run_factory, mcmf, create_files):
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_POOL="", LUSTRE_ALLOC_PFL_ALL="1")
    dom = [c for c in DOM_SEL if not c[6] & LCME_FL_EXTENSION]
    set_dir_default(run.data, pfl_default(dom))
    run.run([create_files, "-n", "2", run.data])
    for r in run.records():
        assert r["result"] == "layout", r
        lists = _lists(r)
        assert lists[0] == "mdt"
        assert [len(lists[i]) for i in (1, 2, 3)] == [2, 1, 2]
        assert r["stripe_size"] == f";{4 * MIB};{MIB};{MIB}"
        assert r["extents"].split(";")[0] == "0-65536"


def test_a_self_extending_default_is_left_to_lustre_untouched(
        shim_run_factory, mcmf, create_files):
    """SEL layouts grow and spill over on OSTs Lustre chooses (lod_object.c
    lod_sel_handler()): the shim does not ask the mapper for them."""
    run = shim_run_factory(mcmf.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_PFL_ALL="1")
    set_dir_default(run.data, pfl_default(DOM_SEL))
    run.run([create_files, "-n", "2", run.data])
    assert [(r["result"], r["reason"]) for r in run.records()] == [("default", "dir_sel")] * 2
    assert mcmf.metrics.requests.labels("ok")._value.get() == 0


def test_what_the_shim_cannot_place_is_left_to_lustre_with_its_reason(
        shim_run_factory, standin, create_files, tmp_path):
    log = tmp_path / "requests.jsonl"
    v1 = standin("normal", log=log)
    run = shim_run_factory(v1.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
    # a v1 mapper refuses the v2 composite request: Lustre's allocator, no failure
    set_dir_default(run.data, pfl_default(THREE))
    p = run.run([create_files, "-n", "2", run.data])
    assert "created=2" in p.stdout
    assert {(r["result"], r["reason"], r["osts"]) for r in run.records()} == \
        {("default", "mapper_error:71", "")}
    # an FLR-mirrored default is Lustre's to place: not asked at all
    mirrored = run.data / "mirrored"
    mirrored.mkdir()
    set_dir_default(mirrored, pfl_default(THREE, mirrors=1))
    before = log.read_text().count("\n") if log.exists() else 0
    run.run([create_files, "-n", "2", mirrored])
    recs = [r for r in run.records() if "/mirrored/" in r["path"]]
    assert [r["reason"] for r in recs] == ["dir_composite"] * 2
    assert (log.read_text().count("\n") if log.exists() else 0) == before


def test_the_mapper_decodes_what_the_shim_packs_and_the_shim_reads_its_replies(
        shim_lib, tmp_path):
    p = subprocess.run([PROG, "pack"], capture_output=True, text=True, timeout=30, check=True)
    out = dict(line.split("=", 1) for line in p.stdout.split())
    req = decode_request(bytes.fromhex(out["composite"]))
    assert (req.op, req.version, req.id) == ("alloc", 2, 5)
    assert [(e.start, e.end) for e in req.extents] == \
        [(65536, GIB), (GIB, 2 * GIB), (4 * GIB, LUSTRE_EOF)]
    assert [(c.stripe_count, c.stripe_size, c.pool) for c in req.components] == \
        [(2, 4 * MIB, "flash"), (1, MIB, "ssd"), (-1, 4 * MIB, "ssd")]  # size 0: priced at 4 MiB
    # 3 GiB expected: each component its share, the SEL extension's range none
    assert [c.expected_bytes for c in req.components] == [GIB - 65536, GIB, 0]
    assert req.owner.uid == 1000 and req.create.path == "/lustre/run/f"
    assert out["small"] == "0"

    def parse(body: bytes) -> dict[str, str]:
        f = tmp_path / "reply"
        f.write_bytes(body)
        got = subprocess.run([PROG, "parse", f], capture_output=True, text=True, timeout=30,
                             check=True).stdout
        return dict(kv.split("=", 1) for kv in got.split())

    ok = parse(encode_composite(9, [(5, 1), (3,), (0, 2, 7)], "mcmf", "stale"))
    assert (ok["rc"], ok["ok"], ok["layouts"]) == ("0", "1", "5,1;3;0,2,7;")
    assert ok["policy"] == "mcmf" and ok["fallback"] == "stale"
    for bad in ([(1, 1)], [], [[70000]], [(1,)] * 17):
        got = parse(encode_composite(9, bad, "mcmf"))
        assert got["ok"] == "0" and got["reason"] == "mapper_garbage:layouts", (bad, got)
    json.dumps(ok)
