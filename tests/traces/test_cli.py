"""``lustre-alloc-traces``: subcommands, exit codes, one-line errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from lustre_alloc.traces.cli import main
from lustre_alloc.traces.format import MAGIC, load_trace, validate_trace
from lustre_alloc.traces.generators import ior


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_writes_the_generators_records_with_provenance(tmp_path, capsys):
    out = tmp_path / "ior.csv.gz"
    code, stdout, err = _run(capsys, "generate", "ior", "--duration", "1800", "--seed", "4",
                             "--jobid", "ior.A", "--out", str(out))
    assert (code, err) == (0, "")
    assert load_trace(out) == list(ior(1800.0, 4, "ior.A"))
    assert "ops/s" in stdout
    import gzip
    with gzip.open(out, "rt") as fh:
        head = [next(fh) for _ in range(4)]
    assert head[0].strip() == MAGIC
    assert head[2].startswith("# generator: lustre_alloc.traces.generators.ior duration_s=1800.0 seed=4")
    assert "transfer_size=16384" in head[3]


def test_generate_param_overrides_a_generator_parameter(tmp_path, capsys):
    out = tmp_path / "tpa.csv"
    code, _, _ = _run(capsys, "generate", "tpa", "--duration", "600", "--seed", "1",
                      "--param", "num_files=3", "--out", str(out))
    assert code == 0
    assert len({r.file_id for r in load_trace(out)}) == 3


def test_generate_unknown_param_is_a_usage_error(tmp_path, capsys):
    code, _, err = _run(capsys, "generate", "tpa", "--duration", "60", "--seed", "1",
                        "--param", "bogus=1", "--out", str(tmp_path / "x.csv"))
    assert code == 2
    assert err.count("\n") == 1 and "bogus" in err


def test_generate_out_of_range_param_is_a_usage_error(tmp_path, capsys):
    code, _, err = _run(capsys, "generate", "hacc", "--duration", "3600", "--seed", "1",
                        "--param", "keep_last=0", "--out", str(tmp_path / "x.csv"))
    assert code == 2 and "keep_last" in err


def test_missing_required_option_exits_2_with_one_line(capsys):
    code, _, err = _run(capsys, "generate", "ior", "--seed", "1", "--out", "x.csv")
    assert code == 2
    assert err.count("\n") == 1 and "--duration" in err


@pytest.mark.parametrize("argv", [[], ["generate"], ["import-darshan"], ["validate"],
                                  ["lfs-df"]])
def test_help_is_available_everywhere(capsys, argv):
    code, out, _ = _run(capsys, *argv, "--help")
    assert code == 0 and out.startswith("usage: lustre-alloc-traces")


def test_import_darshan_accepts_a_shipped_log_name(tmp_path, capsys):
    out = tmp_path / "g.csv"
    code, stdout, _ = _run(capsys, "import-darshan", "sample-goodost.darshan", "--out", str(out))
    assert code == 0
    s = validate_trace(out)
    assert (s.writes, s.bytes_written, s.jobs) == (48, 48 << 30, frozenset({"ior.6909118"}))
    assert "POSIX:" in stdout
    assert any(l.startswith("# note: ") for l in out.read_text().splitlines())


def test_import_darshan_unknown_log_exits_2_listing_shipped_logs(tmp_path, capsys):
    code, _, err = _run(capsys, "import-darshan", "nope.darshan", "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.count("\n") == 1 and "sample-goodost.darshan" in err


def test_import_darshan_of_a_non_log_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.darshan"
    bad.write_text("not darshan")
    code, _, err = _run(capsys, "import-darshan", str(bad), "--out", str(tmp_path / "x"))
    assert code == 1 and "not a Darshan 3 log" in err


def test_validate_prints_a_summary_per_file(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for p in (a, b):
        main(["generate", "tpa", "--duration", "300", "--seed", "2", "--out", str(p)])
    capsys.readouterr()
    code, out, err = _run(capsys, "validate", str(a), str(b))
    assert (code, err) == (0, "")
    assert out.count(": ok, ") == 2 and "jobs: tpa.2" in out


def test_validate_bad_trace_exits_1_with_file_line_field_reason(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text(f"{MAGIC}\ntimestamp_s,op,job_id,file_id,bytes,stripe_count,stripe_size,ost,ops\n"
                 "0,write,j,j/f,12x,1,,,1\n")
    code, _, err = _run(capsys, "validate", str(p))
    assert code == 1
    assert err.strip() == f"lustre-alloc-traces: error: {p}:3: bytes: not an integer: '12x'"


def test_validate_missing_file_exits_2(tmp_path, capsys):
    code, _, err = _run(capsys, "validate", str(tmp_path / "none.csv"))
    assert code == 2 and "none.csv" in err and err.count("\n") == 1


def test_lfs_df_summarises_the_first_snapshot(pytokio_dir, capsys):
    f = pytokio_dir / "sample_ost-fullness.txt.gz"
    code, out, _ = _run(capsys, "lfs-df", str(f))
    assert code == 0
    row = next(l for l in out.splitlines() if l.startswith("snx11168"))
    assert row.split()[:4] == ["snx11168", "/global/cscratch1", "248", "5"]
    assert "70 snapshot(s)" in out


def test_lfs_df_garbled_file_exits_1_naming_the_line(tmp_path, capsys):
    p = tmp_path / "df.txt"
    p.write_text("snx1-OST0000_UUID 10 2x 8  20% /x[OST:0]\n")
    code, _, err = _run(capsys, "lfs-df", str(p))
    assert code == 1 and f"{p}:1:" in err
