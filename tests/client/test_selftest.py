"""``lustre-alloc-selftest`` against the Lustre client stand-in (layouts) and fixture
proc/sys trees (statistics, steering): every check passes where Lustre behaves, a check
fails where the node does not, and the selftest leaves nothing behind but what was there."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lustre_alloc.common import lustre_layout as ll

from ..collectors.conftest import HPE
from .lustre_model import MODEL_SO, SHIM_SO, make_model

PROJECT = Path(__file__).resolve().parents[2]
LAYOUT_CHECKS = ["lustre mount", "explicit list", "refused list", "leased list",
                 "plain default", "PFL default", "SEL default", "no mapper"]


def selftest(*args: str, env: dict | None = None) -> tuple[int, list[dict], str]:
    """Run the command; (exit status, rows from --json, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "lustre_alloc.selftest.cli", "--json", *args], env=env, cwd=PROJECT, capture_output=True, text=True,
                          timeout=300)
    rows = json.loads(proc.stdout) if proc.stdout.strip().startswith("[") else []
    return proc.returncode, rows, proc.stderr


def by_check(rows: list[dict]) -> dict[str, dict]:
    return {r["check"]: r for r in rows}


@pytest.fixture
def model(tmp_path):
    """8 OSTs, one drained behind everyone's back, the root striped over 2."""
    m = make_model(tmp_path, osts=8, nocreate={3}, default_count=2)
    m.set_default(m.root, ll.plain(2, 1 << 20))
    return m


@pytest.mark.parametrize("client", ["2.15.4", "2.12.9"])
def test_every_layout_check_passes_where_lustre_behaves_and_nothing_is_left(model, tmp_path,
                                                                            client):
    """A 2.12 client answers ENODATA for a directory without a default: the selftest
    finds the root's as the shim does."""
    model.client = client
    (model.root / "users-file").write_text("not ours")
    code, rows, err = selftest("--dir", str(model.root), "--root", str(tmp_path / "none"),
                               env=model.env())
    checks = by_check(rows)
    assert [c for c in checks if c in LAYOUT_CHECKS] == LAYOUT_CHECKS
    assert {c: checks[c]["result"] for c in LAYOUT_CHECKS} == dict.fromkeys(LAYOUT_CHECKS,
                                                                              "PASS"), rows
    assert "7 OSTs take objects" in checks["lustre mount"]["detail"]      # OST 3 drained
    assert "setstripe_rejected:22+default_layout" in checks["refused list"]["detail"]
    assert checks["oss statistics"]["result"] == "SKIP"                   # not a server
    assert code == 0, err
    # only what it made is gone; the user's file is untouched
    assert sorted(p.name for p in model.root.iterdir()) == ["users-file"]


def test_keep_leaves_the_test_directory_for_inspection(model, tmp_path):
    code, _, err = selftest("--dir", str(model.root), "--keep", "--root", str(tmp_path / "n"),
                            env=model.env())
    assert code == 0, err
    (kept,) = [p for p in model.root.iterdir() if p.name.startswith("lustre-alloc-selftest.")]
    assert (kept / "explicit-list" / "file").stat().st_size == 64 << 10


def test_a_library_that_ignores_the_mapper_fails_the_list_checks(model, tmp_path):
    """The stand-in itself as the "shim": files get Lustre's layouts, not the lists."""
    code, rows, _ = selftest("--dir", str(model.root), "--shim", str(MODEL_SO),
                             "--root", str(tmp_path / "n"), env=model.env())
    checks = by_check(rows)
    assert checks["explicit list"]["result"] == "FAIL"
    assert checks["leased list"]["result"] == "FAIL"
    assert checks["no mapper"]["result"] == "PASS"        # Lustre's default, as it should
    assert code == 1


def test_a_directory_outside_lustre_fails_in_one_row(tmp_path):
    plain = tmp_path / "ext4"
    plain.mkdir()
    code, rows, _ = selftest("--dir", str(plain), "--shim", str(SHIM_SO),
                             "--root", str(tmp_path / "n"))
    assert by_check(rows)["lustre mount"]["result"] == "FAIL"
    assert "not on a Lustre client mount" in by_check(rows)["lustre mount"]["detail"]
    assert code == 1 and list(plain.iterdir()) == []


def test_usage_errors_are_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lustre_alloc.selftest.cli", "--dir",
                           str(tmp_path / "missing"), "--shim", str(SHIM_SO)], cwd=PROJECT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "not a directory" in proc.stderr


# -- on a server -------------------------------------------------------------------------
@pytest.fixture
def oss_root(tmp_path):
    """A copy of the HPE 2.10.1 OSS/MDS tree (real files; ``degraded`` is writable)."""
    root = tmp_path / "server"
    shutil.copytree(HPE, root, symlinks=True)
    return root


def test_statistics_pass_on_real_files_and_a_garbled_one_fails_naming_its_ost(oss_root):
    code, rows, err = selftest("--source", "files", "--root", str(oss_root))
    checks = by_check(rows)
    assert checks["oss statistics"]["result"] == "PASS", rows
    assert checks["mds statistics"]["result"] == "PASS", rows
    assert checks["client layouts"]["result"] == "SKIP" and code == 0, err
    stats = oss_root / "proc/fs/lustre/obdfilter/lustrefs-OST0002/stats"
    stats.unlink()
    stats.write_text("snapshot_time 12 secs.usecs\nwrite_bytes garbage\n")
    code, rows, _ = selftest("--source", "files", "--root", str(oss_root))
    oss = by_check(rows)["oss statistics"]
    assert oss["result"] == "FAIL" and "lustrefs-OST0002" in oss["detail"]
    assert "1 of 4 OSTs" in oss["detail"] and code == 1


def test_steer_sets_and_restores_degraded_on_an_oss(oss_root, tmp_path):
    degraded = oss_root / "proc/fs/lustre/obdfilter/lustrefs-OST0004/degraded"
    assert degraded.read_text().strip() == "0"
    code, rows, err = selftest("--source", "files", "--root", str(oss_root),
                               "--steer-journal", str(tmp_path / "j.json"), "--steer", "lustrefs-OST0004")
    checks = by_check(rows)
    assert checks["steer degraded lustrefs-OST0004: set"]["result"] == "PASS", rows
    assert "-> 1" in checks["steer degraded lustrefs-OST0004: set"]["detail"]
    assert checks["steer degraded lustrefs-OST0004: restored"]["result"] == "PASS"
    assert degraded.read_text().strip() == "0" and code == 0, err


def test_steer_leaves_an_ost_flagged_by_someone_else_alone(oss_root, tmp_path):
    degraded = oss_root / "proc/fs/lustre/obdfilter/lustrefs-OST0004/degraded"
    degraded.unlink()
    degraded.write_text("1\n")                      # an admin's RAID script
    code, rows, _ = selftest("--source", "files", "--root", str(oss_root),
                             "--steer-journal", str(tmp_path / "j.json"), "--steer", "lustrefs-OST0004")
    (row,) = [r for r in rows if r["check"].startswith("steer")]
    assert row["result"] == "SKIP" and "refused" in row["detail"]
    assert degraded.read_text().strip() == "1" and code == 0


def test_steer_drains_every_mdt_of_an_mds_and_restores_both_counts(tmp_path):
    root = tmp_path / "mds"
    for mdt in ("MDT0000", "MDT0001"):               # DNE: two MDTs on this MDS
        osp = root / "sys/fs/lustre/osp" / f"lustrefs-OST0003-osc-{mdt}"
        osp.mkdir(parents=True)
        (osp / "max_create_count").write_text("20000\n")
        (osp / "create_count").write_text("4096\n")
    code, rows, err = selftest("--source", "files", "--root", str(root),
                               "--steer-journal", str(tmp_path / "j.json"), "--steer", "lustrefs-OST0003")
    checks = by_check(rows)
    set_row = checks["steer drain lustrefs-OST0003: set"]
    assert set_row["result"] == "PASS" and set_row["detail"].count("20000 -> 0") == 2, rows
    assert checks["steer drain lustrefs-OST0003: restored"]["result"] == "PASS"
    for mdt in ("MDT0000", "MDT0001"):
        osp = root / "sys/fs/lustre/osp" / f"lustrefs-OST0003-osc-{mdt}"
        assert (osp / "max_create_count").read_text().strip() == "20000"
    assert code == 0, err


def test_steer_on_an_ost_that_is_not_this_servers_fails(oss_root, tmp_path):
    code, rows, _ = selftest("--source", "files", "--root", str(oss_root),
                             "--steer-journal", str(tmp_path / "j.json"), "--steer", "lustrefs-OST0009")
    (row,) = [r for r in rows if r["check"].startswith("steer")]
    assert row["result"] == "FAIL" and "neither an OST of this OSS" in row["detail"]
    assert code == 1
