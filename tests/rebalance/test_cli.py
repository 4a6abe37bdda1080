"""lustre-alloc-rebalance plan: real tool formats in, a script or JSON out, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lustre_alloc.rebalance.plan_command import main
from lustre_alloc.rebalance.plan_inputs import read_getstripe, write_state_json
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster

GIB = 1 << 30
ROOT = Path(__file__).resolve().parents[2]

# lfs df of a file system expanded from 3 to 4 OSTs (KiB, as lfs df prints).
LFS_DF = """\
UUID                   1K-blocks        Used   Available Use% Mounted on
testfs-MDT0000_UUID      1000000       10000      990000   1% /lustre[MDT:0]
testfs-OST0000_UUID     41943040    31457280    10485760  75% /lustre[OST:0]
testfs-OST0001_UUID     41943040    31457280    10485760  75% /lustre[OST:1]
testfs-OST0002_UUID     41943040    31457280    10485760  75% /lustre[OST:2]
testfs-OST0003_UUID     41943040           0    41943040   0% /lustre[OST:3]

filesystem_summary:    167772160    94371840    73400320  57% /lustre
"""


def _getstripe_plain(path: str, osts: list[int]) -> str:
    rows = "".join(f"\t{o:6d}\t{1000 + o:14d}\t{hex(1000 + o):>14}\t{0:14d}\n" for o in osts)
    return (f"{path}\nlmm_stripe_count:  {len(osts)}\nlmm_stripe_size:   1048576\n"
            f"lmm_pattern:       raid0\nlmm_layout_gen:    0\nlmm_stripe_offset: {osts[0]}\n"
            f"\tobdidx\t\t objid\t\t objid\t\t group\n{rows}\n")


def _getstripe_pfl(path: str, osts: list[int]) -> str:
    objs = "".join(f"      - {i}: {{ l_ost_idx: {o}, l_fid: [0x10000000{o}:0x2:0x0] }}\n"
                   for i, o in enumerate(osts))
    return (f"{path}\n  lcm_layout_gen:    2\n  lcm_mirror_count:  1\n  lcm_entry_count:   1\n"
            f"    lcme_id:             1\n    lcme_mirror_id:      0\n    lcme_flags:          init\n"
            f"    lcme_extent.e_start: 0\n    lcme_extent.e_end:   EOF\n"
            f"      lmm_stripe_count:  {len(osts)}\n      lmm_stripe_size:   4194304\n"
            f"      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n"
            f"      lmm_stripe_offset: {osts[0]}\n      lmm_objects:\n{objs}\n")


@pytest.fixture
def inputs(tmp_path):
    """30 files of 1 GiB per old OST (the 75% in LFS_DF), a few striped, one PFL."""
    find, stripe = [], []
    for i in range(90):
        path = f"/lustre/proj/run {i}.h5"          # a space in the name
        osts = [i % 3] if i % 10 else [i % 3, (i + 1) % 3]
        find.append(f"{GIB} {path}")
        stripe.append(_getstripe_pfl(path, osts) if i == 5 else _getstripe_plain(path, osts))
    (tmp_path / "df.txt").write_text(LFS_DF)
    (tmp_path / "files.txt").write_text("\n".join(find) + "\n")
    (tmp_path / "layouts.txt").write_text("".join(stripe))
    return tmp_path


def _args(d: Path, *extra: str) -> list[str]:
    return ["plan", "--state", str(d / "df.txt"), "--ost-rate-mib-s", "1000",
            "--files", str(d / "files.txt"), "--layouts", str(d / "layouts.txt"), *extra]


def test_getstripe_reader_plain_and_pfl(inputs):
    lay = read_getstripe(inputs / "layouts.txt")
    assert lay["/lustre/proj/run 1.h5"] == ([1], 1048576)
    assert lay["/lustre/proj/run 10.h5"] == ([1, 2], 1048576)
    assert lay["/lustre/proj/run 5.h5"] == ([2], 4194304)


def test_script_moves_data_to_the_new_ost(inputs, capsys):
    assert main(_args(inputs, "--budget", "0.2")) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("lfs migrate")]
    assert out.startswith("#!/bin/sh\n")
    assert lines, out
    assert all(" -o 3 " in ln or "-o 3," in ln or ",3 " in ln for ln in lines)
    assert "'/lustre/proj/run " in lines[0]                       # quoted for the shell
    assert lines[0].startswith("lfs migrate -c 1 -S ")


def test_json_form_via_python_m(inputs):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "lustre_alloc.rebalance", *_args(inputs, "--budget",
                                                                         "0.5", "--json")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    s = doc["summary"]
    assert s["fill_max_mean_after"] < s["fill_max_mean_before"]
    assert doc["moves"] and all(3 in m["to_osts"] for m in doc["moves"])
    assert doc["moves"][0]["size_bytes"] in (GIB,)
    # ~1/4 of the data goes to the new OST: 22-23 files of 1 GiB.
    assert 20 <= len(doc["moves"]) <= 25


def test_state_json_with_flags(inputs, tmp_path):
    snap = make_uniform_cluster(1, 4, kbytes_total=41943040,
                                kbytes_used={0: 31457280, 1: 31457280, 2: 31457280})
    snap.osts[3].active = False                  # the new OST is not up yet
    write_state_json(snap, {i: 1e9 for i in range(4)}, tmp_path / "state.json")
    args = _args(inputs, "--budget", "0.2")
    args[2] = str(tmp_path / "state.json")
    assert main(args) == 0


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_inputs_are_one_line_exit_2(inputs, capsys):
    assert "budget" in _error(capsys, _args(inputs, "--budget", "0"))
    (inputs / "layouts.txt").write_text(_getstripe_plain("/lustre/proj/run 0.h5", [7]))
    (inputs / "files.txt").write_text(f"{GIB} /lustre/proj/run 0.h5\n")
    assert "unknown OST 7" in _error(capsys, _args(inputs, "--budget", "0.2"))
    (inputs / "files.txt").write_text(f"{GIB} /lustre/proj/run 0.h5\n{GIB} /lustre/other\n")
    assert "/lustre/other: no layout" in _error(capsys, _args(inputs, "--budget", "0.2"))
    (inputs / "files.txt").write_text("/lustre/proj/run 0.h5\n")
    msg = _error(capsys, _args(inputs, "--budget", "0.2"))
    assert "files.txt:1:" in msg and "%s %p" in msg
    (inputs / "df.txt").write_text('{"osts": [{"index": 0}]}')
    assert "'kbytes_total'" in _error(capsys, _args(inputs, "--budget", "0.2"))


def test_usage_error_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--budget", "0.2"])
    assert e.value.code == 2


def test_plan_help_prints_the_lfs_find_format_without_a_traceback():
    """A ``%`` in a help string once made ``plan --help`` crash (argparse %-formats help)."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "lustre_alloc.rebalance", "plan", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "-printf '%s %p\\n'" in done.stdout
