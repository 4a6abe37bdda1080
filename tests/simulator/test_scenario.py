import pytest

from lustre_alloc.simulator.cli import main
from lustre_alloc.simulator.runner import prepare
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario

from .conftest import rec, small

MIB = 1 << 20


def cli_error(capsys, path):
    code = main(["validate", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2  # an invalid scenario is a configuration error
    assert "\n" not in err
    return err


def test_unknown_policy_is_one_clear_line(make_scenario, capsys):
    p = make_scenario(small(policies='["round_robin", "best_fit"]'), [rec(0, "write", "a", "f", 1)])
    err = cli_error(capsys, p)
    assert "policies: unknown policy 'best_fit'" in err and "lustre_qos" in err


def test_stripe_count_larger_than_ost_count_is_rejected(make_scenario, capsys):
    p = make_scenario(small(), [rec(0, "write", "a", "f", MIB, sc=8)])
    assert "stripe_count 8" in cli_error(capsys, p) and "4 OSTs" in cli_error(capsys, p)


def test_missing_trace_file_is_rejected(make_scenario, capsys):
    p = make_scenario(small())  # no trace written
    assert "trace file not found" in cli_error(capsys, p)


def test_malformed_trace_names_file_line_and_field(make_scenario, tmp_path, capsys):
    p = make_scenario(small(), [rec(0, "write", "a", "f", MIB)])
    t = tmp_path / "t.csv"
    t.write_text(t.read_text() + "5.0,write,a,g,lots,1,1048576,,1\n")
    err = cli_error(capsys, p)
    assert "t.csv:4: bytes: not an integer" in err


def test_fill_length_must_match_ost_count(make_scenario):
    p = make_scenario(small(fill="[0.1, 0.2]"), [rec(0, "write", "a", "f", 1)])
    with pytest.raises(ScenarioError, match="used_fraction: has 2 values for 4 OSTs"):
        load_scenario(p)


def test_unknown_key_is_rejected(make_scenario):
    p = make_scenario(small().replace("seed = 7", "seed = 7\nsede = 8"), [rec(0, "write", "a", "f", 1)])
    with pytest.raises(ScenarioError, match="sede: unknown key"):
        load_scenario(p)


def test_unknown_bundled_scenario_lists_the_bundled_ones():
    with pytest.raises(ScenarioError, match="paper-32ost"):
        load_scenario("no-such-scenario")


def test_bundled_scenarios_validate():
    for name in ("paper-32ost", "nersc-edison-real"):
        sc = load_scenario(name)
        cluster = prepare(sc)
        assert cluster.ost_count == (32 if name == "paper-32ost" else 24)


def test_real_lfs_df_scenario_takes_sizes_fill_and_oss_map_from_the_files(pytokio_dir):
    from lustre_alloc.traces.lfs_df import read_lctl_dl, read_lfs_df
    sc = load_scenario("nersc-edison-real")
    cluster = prepare(sc)
    df = read_lfs_df(pytokio_dir / "sample_ost-fullness.txt.gz")
    osts = sorted(df.snapshots[0].filesystems["snx11025"].osts, key=lambda o: o.index)
    assert cluster.capacity_bytes.tolist() == [o.kbytes_total * 1024 for o in osts]
    assert cluster.used_bytes.tolist() == [(o.kbytes_total - o.kbytes_avail) * 1024 for o in osts]
    nids = read_lctl_dl(pytokio_dir / "sample_ost-map.txt.gz").snapshots[0].ost_nids["snx11025"]
    assert [cluster.oss_names[s] for s in cluster.ost_oss] == [nids[o.index] for o in osts]


def test_the_osts_osd_is_ldiskfs_unless_named_and_an_unknown_one_is_one_clear_line(
        make_scenario, capsys):
    p = make_scenario(small(), [rec(0, "write", "a", "f", 1)])
    assert load_scenario(p).cluster.osd == "ldiskfs"
    p = make_scenario(small().replace("ost_bandwidth_mib_s = 100",
                                      'ost_bandwidth_mib_s = 100\nosd = "zfs"'),
                      [rec(0, "write", "a", "f", 1)])
    sc = load_scenario(p)
    assert sc.cluster.osd == "zfs" and prepare(sc).osd == "zfs"
    p = make_scenario(small().replace("ost_bandwidth_mib_s = 100",
                                      'ost_bandwidth_mib_s = 100\nosd = "btrfs"'),
                      [rec(0, "write", "a", "f", 1)])
    assert "osd: 'btrfs': expected one of ldiskfs, zfs" in cli_error(capsys, p)
