"""``lfs df`` and ``lctl dl -t`` readers on NERSC pytokio's real dumps and on garbled input."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from lustre_alloc.traces.lfs_df import LustreDumpFormatError, read_lctl_dl, read_lfs_df


@pytest.fixture(scope="module")
def pytokio(pytokio_dir) -> Path:
    return pytokio_dir


def _raw_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as fh:
        return fh.read().splitlines()


def _first_snapshot_lines(path: Path) -> list[str]:
    """The raw lines of the first BEGIN block (or of the whole bare dump)."""
    lines = _raw_lines(path)
    if lines[0].startswith("BEGIN"):
        nxt = next(i for i in range(1, len(lines)) if lines[i].startswith("BEGIN"))
        return lines[1:nxt]
    return lines


@pytest.fixture(scope="module")
def fullness(pytokio):
    return read_lfs_df(pytokio / "sample_ost-fullness.txt.gz")


def test_fullness_series_has_one_snapshot_per_begin_line(pytokio, fullness):
    begins = [l for l in _raw_lines(pytokio / "sample_ost-fullness.txt.gz") if l.startswith("BEGIN")]
    assert len(fullness.snapshots) == len(begins) == 70
    assert fullness.snapshots[0].timestamp == int(begins[0].split()[1]) == 1489998203
    assert fullness.skipped == []


def test_first_snapshot_ost_and_mdt_counts_per_file_system_match_raw_lines(pytokio, fullness):
    raw = _first_snapshot_lines(pytokio / "sample_ost-fullness.txt.gz")
    snap = fullness.snapshots[0]
    for fsname in ("snx11025", "snx11035", "snx11036", "snx11168"):
        n_ost = sum(1 for l in raw if l.startswith(f"{fsname}-OST"))
        n_mdt = sum(1 for l in raw if l.startswith(f"{fsname}-MDT"))
        assert len(snap.filesystems[fsname].osts) == n_ost
        assert len(snap.filesystems[fsname].mdts) == n_mdt
    assert {k: len(v.osts) for k, v in snap.filesystems.items()} == {
        "snx11025": 24, "snx11035": 24, "snx11036": 36, "snx11168": 248}
    assert snap.filesystems["snx11168"].mount == "/global/cscratch1"
    assert len(snap.filesystems["snx11168"].mdts) == 5


def test_a_specific_ost_carries_the_raw_numbers(pytokio, fullness):
    raw = next(l for l in _first_snapshot_lines(pytokio / "sample_ost-fullness.txt.gz")
               if l.startswith("snx11035-OST000a_UUID"))
    total, used, avail = (int(x) for x in raw.split()[1:4])
    ost = next(o for o in fullness.snapshots[0].filesystems["snx11035"].osts if o.index == 10)
    assert (ost.kbytes_total, ost.kbytes_used, ost.kbytes_avail) == (total, used, avail)
    assert (total, used, avail) == (90767651352, 68029569844, 21786608340)
    assert ost.fill == pytest.approx(used / total)


def test_bare_lfs_df_dump_is_one_snapshot_without_time(pytokio):
    df = read_lfs_df(pytokio / "lfs-df.txt.gz")
    assert len(df.snapshots) == 1 and df.snapshots[0].timestamp is None
    scratch2 = df.snapshots[0].filesystems["snx11035"]
    assert [o.index for o in scratch2.osts] == list(range(24))
    assert scratch2.osts[0].kbytes_used == 65387344040
    mdt = scratch2.mdts[0]
    assert (mdt.kind, mdt.index, mdt.kbytes_total) == ("MDT", 0, 2255453580)


def test_lctl_dl_maps_every_ost_to_its_oss_nid(pytokio):
    dl = read_lctl_dl(pytokio / "lctl-dl-t.txt.gz")
    (snap,) = dl.snapshots
    raw = _raw_lines(pytokio / "lctl-dl-t.txt.gz")
    osc = [l.split() for l in raw if " osc " in l]
    assert sum(len(v) for v in snap.ost_nids.values()) == len(osc) == 332
    assert snap.ost_nids["snx11035"][0x14] == "10.100.101.25@o2ib2"
    assert snap.mdt_nids["snx11168"][3] == "10.100.105.0@o2ib4"
    assert {k: len(v) for k, v in snap.ost_nids.items()} == {
        "snx11025": 24, "snx11035": 24, "snx11036": 36, "snx11168": 248}
    assert dl.skipped == []


def test_osts_by_nid_groups_failed_over_osts_on_one_oss(pytokio):
    (snap,) = read_lctl_dl(pytokio / "lctl-dl-t.txt.gz").snapshots
    by_nid = snap.osts_by_nid("snx11035")
    # in this dump OST0002 and OST0003 are both served by 10.100.101.7 (failover)
    assert by_nid["10.100.101.7@o2ib2"] == [2, 3]
    assert len(by_nid) == 23


def test_ost_map_series_has_one_snapshot_per_begin(pytokio):
    dl = read_lctl_dl(pytokio / "sample_ost-map.txt.gz")
    assert len(dl.snapshots) == 70
    assert dl.snapshots[0].timestamp == 1489998203
    assert dl.snapshots[0].ost_nids["snx11035"][0x14] == "10.100.101.25@o2ib2"


def _write(tmp_path: Path, text: str, name: str = "df.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = "snx11035-OST0001_UUID 90767651352 64844166288 24966115416  72% /scratch2[OST:1]\n"


def test_garbled_ost_numbers_raise_with_file_and_line(tmp_path):
    p = _write(tmp_path, "BEGIN 1\n" + GOOD +
               "snx11035-OST0002_UUID 9076765x352 64844166288 24966115416  72% /scratch2[OST:2]\n")
    with pytest.raises(LustreDumpFormatError) as err:
        read_lfs_df(p)
    assert (err.value.path, err.value.line) == (str(p), 3)
    assert str(err.value).startswith(f"{p}:3: lfs df target line")


def test_hex_name_and_bracket_index_must_agree(tmp_path):
    p = _write(tmp_path, GOOD.replace("[OST:1]", "[OST:7]"))
    with pytest.raises(LustreDumpFormatError, match=r":1: target snx11035-OST0001 does not match"):
        read_lfs_df(p)


def test_used_above_total_is_an_error(tmp_path):
    p = _write(tmp_path, "snx11035-OST0001_UUID 10 64 1  72% /scratch2[OST:1]\n")
    with pytest.raises(LustreDumpFormatError, match=r":1: used 64"):
        read_lfs_df(p)


def test_bad_begin_epoch_is_an_error(tmp_path):
    p = _write(tmp_path, "BEGIN yesterday\n" + GOOD)
    with pytest.raises(LustreDumpFormatError, match=r":1: BEGIN: not an epoch"):
        read_lfs_df(p)


def test_unknown_lines_are_skipped_and_reported_not_fatal(tmp_path):
    p = _write(tmp_path, "lfs: some warning\n" + GOOD +
               "OST0002             : inactive device\n")
    df = read_lfs_df(p)
    assert [o.index for o in df.snapshots[0].filesystems["snx11035"].osts] == [1]
    assert df.skipped == [(1, "lfs: some warning"), (3, "OST0002             : inactive device")]


def test_gzip_and_plain_read_the_same(tmp_path):
    plain = _write(tmp_path, "BEGIN 5\n" + GOOD)
    gz = tmp_path / "df.txt.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("BEGIN 5\n" + GOOD)
    assert read_lfs_df(plain).snapshots == read_lfs_df(gz).snapshots


def test_lctl_osc_line_without_nid_says_to_use_dash_t(tmp_path):
    p = _write(tmp_path, "  4 UP osc snx11035-OST0014-osc-ffff885f81a64000 "
               "8dbdc7f6-8f86-86ea-052f-357e2db2a7d9 5\n", "dl.txt")
    with pytest.raises(LustreDumpFormatError, match=r"dl.txt:1: osc device .* has no NID column \(run 'lctl dl -t'\)"):
        read_lctl_dl(p)


def test_lctl_unknown_line_is_skipped_and_reported(tmp_path):
    p = _write(tmp_path, "garbage here\n  4 UP osc snx11035-OST0014-osc-ffff885f81a64000 "
               "8dbdc7f6 5 10.0.0.1@tcp\n", "dl.txt")
    dl = read_lctl_dl(p)
    assert dl.skipped == [(1, "garbage here")]
    assert dl.snapshots[0].ost_nids == {"snx11035": {20: "10.0.0.1@tcp"}}


def test_missing_dump_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_lfs_df(tmp_path / "none.txt")
