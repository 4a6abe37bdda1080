"""Real programs (cp, dd, Python) under the shim on the Lustre client stand-in, with a
mapper that hands out lists Lustre refuses: two OSTs are drained (max_create_count=0)
behind the mapper's back.  Whatever the mode (per create, leased, PFL, no mapper, a lease
gone stale), every write succeeds, every file has a layout, none is on a refused OST, and
a file whose application asked for nothing gets the effective default's stripe count."""
from __future__ import annotations

import subprocess

import pytest

from lustre_alloc.common import lustre_layout as ll

from ..service.conftest import make_service
from tests.support import wait_for
from .conftest import parse_records
from .lustre_model import make_model

MIB = 1 << 20
DRAINED = {3, 17}
FILES = 60


@pytest.fixture(scope="module")
def mapper():
    """Round-robin over 32 OSTs: it knows nothing of the drain, so its lists name them."""
    svc = make_service(static_cluster="8x4", policy="round_robin")
    yield svc
    svc.stop()


@pytest.fixture
def model(tmp_path):
    m = make_model(tmp_path, osts=32, nocreate=set(DRAINED))
    m.set_default(m.root, ll.plain(2, MIB))          # lfs setstripe -c 2 /mnt/lustre
    (m.root / "data").mkdir()
    return m


def _source(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * 256)          # 64 KiB
    return src


def _check(model, files, want_count=2):
    missing, refused, wrong = [], [], []
    for f in files:
        layout = model.layout(f)
        if layout is None:
            missing.append(f)
            continue
        osts = layout.components[0].osts if layout.components else layout.osts
        if set(osts) & DRAINED:
            refused.append(f)
        if want_count and len(osts) != want_count:
            wrong.append((f, len(osts)))
    assert (missing, refused, wrong) == ([], [], [])


def _run(cmd, env):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _python_writes(model, env, files, size):
    """A Python child on the mount writing ``files`` new files of ``size`` bytes each."""
    data = model.root / "data"
    code = (f"import os\nfor i in range({files}):\n"
            f"    with open('{data}/py%d' % i, 'wb') as f:\n"
            f"        f.write(b'x' * {size})\n")
    p = _run(["python3", "-c", code], env)
    assert p.returncode == 0, p.stderr
    return sorted(data.iterdir())


def _refusals(record):
    return [r for r in parse_records(record) if r["reason"].startswith("setstripe_rejected")]


@pytest.mark.parametrize("lease", ["0", "1"], ids=["per-create", "leased"])
def test_cp_and_dd_write_every_file_with_drained_osts_in_the_lists(
        model, mapper, tmp_path, lease):
    src = _source(tmp_path)
    record = tmp_path / "record.tsv"
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_ALLOC_LEASE=lease,
                    LUSTRE_ALLOC_RECORD=str(record))
    data = model.root / "data"
    script = (f"for i in $(seq 1 {FILES // 2}); do cp {src} {data}/cp$i || exit 1; "
              f"dd if={src} of={data}/dd$i bs=64k count=1 status=none || exit 1; done")
    p = _run(["sh", "-c", script], env)
    assert p.returncode == 0, p.stderr
    files = sorted(data.iterdir())
    assert len(files) == FILES
    assert all(f.read_bytes() == src.read_bytes() for f in files)
    _check(model, files)
    # the mapper's lists named the drained OSTs, and Lustre refused them
    refused = _refusals(record)
    assert refused and all(r["reason"].endswith("+default_layout") for r in refused)


@pytest.mark.parametrize("client", ["2.15.4", "2.12.9"])
def test_python_writes_under_the_roots_default_whatever_the_client_answers(
        model, mapper, tmp_path, client):
    """A 2.12 client answers ENODATA for a directory without a default; the shim reads
    the mount root's as Lustre would apply it, not 1 stripe."""
    model.client = client
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="5000")
    _check(model, _python_writes(model, env, FILES, 65536))


def test_a_pfl_default_places_the_first_component_and_later_ones_never_fail_writes(
        model, mapper, tmp_path):
    model.set_default(model.root / "data", ll.composite([
        ll.Component(0, MIB, ll.plain(1, MIB)),
        ll.Component(MIB, ll.LUSTRE_EOF, ll.plain(4, MIB))]))
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="5000")
    for f in _python_writes(model, env, 20, 2 << 20):
        comps = model.layout(f).components
        assert [c.initialized for c in comps] == [True, True]
        assert [len(c.osts) for c in comps] == [1, 4]
        assert not set(comps[0].osts + comps[1].osts) & DRAINED


def test_without_a_mapper_every_file_gets_lustres_default(model, tmp_path, dead_endpoint):
    src = _source(tmp_path)
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=dead_endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="20")
    data = model.root / "data"
    p = _run(["sh", "-c", f"for i in $(seq 1 20); do cp {src} {data}/f$i || exit 1; done"],
             env)
    assert p.returncode == 0, p.stderr
    _check(model, sorted(data.iterdir()))


def test_a_lease_gone_stale_is_replaced_and_no_write_fails(model, mapper, tmp_path):
    """Layouts leased, then an OST drained: the refused layout gets the default, and the
    rest of that lease is dropped (asked again) rather than refused file by file."""
    record = tmp_path / "record.tsv"
    model.nocreate = set()
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_ALLOC_RECORD=str(record))
    data = model.root / "data"
    drained = "\\n".join(model.state.read_text().splitlines()).replace(
        "nocreate = ", "nocreate = " + ",".join(map(str, sorted(DRAINED))))
    code = (f"import os\n"
            f"def make(i):\n"
            f"    with open('{data}/f%d' % i, 'wb') as f:\n"
            f"        f.write(b'x' * 65536)\n"
            f"for i in range(10): make(i)\n"
            f"open('{model.state}', 'w').write('{drained}\\n')\n"
            f"for i in range(10, 80): make(i)\n")
    p = _run(["python3", "-c", code], env)
    assert p.returncode == 0, p.stderr
    files = sorted(data.iterdir())
    assert len(files) == 80
    late = [f for f in files if int(f.name[1:]) >= 10]
    _check(model, late)
    recs = parse_records(record)
    refused = _refusals(record)
    assert refused, "the stale lease's lists were never refused: the test saw nothing"
    # no layout naming a drained OST was applied after the drain ...
    naming = [r for r in recs if r["result"] == "layout" and
              int(r["path"].rsplit("/f", 1)[1]) >= 10 and
              set(map(int, r["osts"].split(","))) & DRAINED]
    assert naming == []
    # ... each refused one got the default, and the rest of its lease was never used
    assert all(r["reason"].endswith("+default_layout") for r in refused)
    for r in refused:
        later = recs[recs.index(r) + 1:]
        assert r["lease"] and all(x["lease"] != r["lease"] for x in later), r
    # explain names the leased layout each file got, and none for a file Lustre gave
    # its default (the shim names only files created with the leased layout)
    leased = [r for r in recs if r["result"] == "layout" and r["lease"]]
    wait_for(lambda: mapper.desk.explain(path=leased[-1]["path"]) is not None,
             timeout_s=5.0, what="the last leased file named")
    for r in leased:
        assert mapper.desk.explain(path=r["path"])["osts"] == list(map(int, r["osts"].split(",")))
    assert all(mapper.desk.explain(path=r["path"]) is None for r in refused)


def test_every_ost_drained_fails_the_open_as_plain_lustre_does_and_leaves_no_file(
        mapper, tmp_path):
    """Lustre 2.17.0, every OST drained: ``dd`` fails its open with ENOSPC and leaves no
    file; the shim, which had reopened the inode (writes then failed EBADF, llite's
    och_usecount), must give the same."""
    model = make_model(tmp_path, osts=32, nocreate=set(range(32)))
    src = _source(tmp_path)
    record = tmp_path / "record.tsv"
    outcomes = {}
    for shim in (False, True):
        env = model.env(shim=shim, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                        LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_ALLOC_LEASE="0",
                        LUSTRE_ALLOC_RECORD=str(record))
        target = model.root / f"dd-{shim}"
        p = _run(["dd", f"if={src}", f"of={target}", "bs=64k", "count=1", "status=none"], env)
        outcomes[shim] = (p.returncode != 0, "No space left on device" in p.stderr,
                          target.exists())
    assert outcomes[True] == outcomes[False] == (True, True, False)
    assert parse_records(record) == []     # no file: nothing recorded


def test_a_programs_own_layout_is_left_to_it(model, mapper, tmp_path):
    """``lfs setstripe -o 5,6 FILE``, ``llapi_layout_file_create`` and ROMIO open with
    O_LOV_DELAY_CREATE and set their own layout; under the shim they get it (before, the
    shim placed the file and their SETSTRIPE failed EEXIST: seen on 2.17.0)."""
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint,
                    LUSTRE_ALLOC_TIMEOUT_MS="5000")
    path = model.root / "data" / "mine"
    out = model.python(f"""
fd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL | ll.O_LOV_DELAY_CREATE, 0o644)
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([5, 6], 1 << 20))
out['written'] = os.write(fd, b"x")
""", shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    assert out == {"written": 1}
    assert model.layout(path).osts == [5, 6]
    del env


def test_a_0444_create_keeps_the_mappers_layout_and_says_lustre_answered_eacces(
        mapper, tmp_path):
    """mdt_open.c makes the layout before the open's permission check: a user's
    SETSTRIPE on a file without owner write (cp of a read-only file) answers EACCES with
    the layout in place, which the creating descriptor does not see (seen on 2.17.0).
    The shim reads it back through a new open and keeps it (it had asked again, got
    EEXIST and recorded +no_layout; then, reading the descriptor, removed the file).
    Root squashed, as a user's create."""
    model = make_model(tmp_path, osts=32, root_squash=True)    # no OST drained
    (model.root / "data").mkdir()
    record = tmp_path / "record.tsv"
    path = model.root / "data" / "ro"
    out = model.python(f"""
fd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
out['written'] = os.write(fd, b"x")
""", shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
        LUSTRE_ALLOC_LEASE="0", LUSTRE_ALLOC_RECORD=str(record))
    assert out == {"written": 1}
    (rec,) = parse_records(record)
    assert (rec["result"], rec["reason"]) == ("layout", "setstripe_late:13"), rec
    assert [int(x) for x in rec["osts"].split(",")] == model.layout(path).osts
    assert rec["osts"] == rec["asked"]


def test_a_placed_create_reads_its_layout_from_the_setstripe_answer(model, mapper, tmp_path):
    """llite/file.c ll_lov_setstripe() hands the layout it made back in the SETSTRIPE
    buffer; the shim records it from there. On Lustre a GETSTRIPE more could cost the MDS
    a layout lock enqueue per create (bench/lustre_vm_create_rpcs.py). A refused list (a
    drained OST named) is still read back through a new open."""
    calls, record = tmp_path / "calls.log", tmp_path / "rec.tsv"
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint, LUSTRE_ALLOC_RECORD=str(record),
                    LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_MODEL_CALLS=str(calls))
    files = _python_writes(model, env, 12, 4096)
    _check(model, files)
    lines = calls.read_text().splitlines()
    recs = {r["path"]: r for r in parse_records(record)}
    placed = [f for f in files if recs[str(f)]["reason"] == ""]
    assert len(placed) >= 6
    for f in placed:
        assert [line for line in lines if line.endswith(f" {f}")] == [f"SETSTRIPE {f}"]
        assert recs[str(f)]["osts"] == ",".join(map(str, model.layout(f).osts))


@pytest.mark.parametrize("lease", ["0", "1"], ids=["per-create", "leased"])
def test_an_existing_file_opened_with_o_creat_is_the_applications_own_open(model, mapper,
                                                                            tmp_path, lease):
    """No existence check before the create (on Lustre it cost the MDS two RPCs a file):
    the shim's O_EXCL create meets the existing file, and the application's own open
    (O_TRUNC here) does what plain Lustre does: no SETSTRIPE, no record, layout kept."""
    calls, record = tmp_path / "calls.log", tmp_path / "rec.tsv"
    env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=mapper.endpoint, LUSTRE_ALLOC_RECORD=str(record),
                    LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_MODEL_CALLS=str(calls),
                    LUSTRE_ALLOC_LEASE=lease)
    (f,) = _python_writes(model, env, 1, 4096)
    before = model.layout(f).osts
    calls.unlink()
    record.unlink()
    code = f"with open('{f}', 'w') as g:\n    g.write('short')\n"
    p = _run(["python3", "-c", code], env)
    assert p.returncode == 0, p.stderr
    assert f.read_text() == "short" and model.layout(f).osts == before
    assert not calls.exists() or "SETSTRIPE" not in calls.read_text()
    assert not record.exists() or parse_records(record) == []


@pytest.mark.parametrize("own_count", [None, 3], ids=["directory-default", "env-count"])
def test_alike_osts_leave_creates_to_lustres_allocator_with_the_layout_asked(
        model, tmp_path, own_count):
    """The default mcmf on alike OSTs answers leases with ``allocator: "lustre"``: the
    shim creates each file without an OST list, and Lustre's allocator places it (the
    directory's 2 stripes, or the 3 the environment asks for), skipping the OSTs without
    precreated objects as LOD does. One lease request per lifetime, not per file."""
    svc = make_service(static_cluster="8x4", policy="mcmf")
    record = tmp_path / "record.tsv"
    extra = {"LUSTRE_ALLOC_STRIPE_COUNT": str(own_count)} if own_count else {}
    try:
        env = model.env(shim=True, LUSTRE_ALLOC_MAPPER=svc.endpoint,
                        LUSTRE_ALLOC_TIMEOUT_MS="5000", LUSTRE_ALLOC_RECORD=str(record),
                        **extra)
        files = _python_writes(model, env, 20, 65536)
        _check(model, files, want_count=own_count or 2)
        records = parse_records(record)
        assert len(records) == 20
        assert {r["reason"] for r in records} == {"lustre_allocator"}
        assert svc.metrics.leases.labels("granted")._value.get() == 0
        assert 1 <= svc.metrics.leases.labels("lustre")._value.get() < 20
    finally:
        svc.stop()
