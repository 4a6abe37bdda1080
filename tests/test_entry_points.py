"""Every console script: --version, one-line usage errors with exit code 2, and a bad
--log-level as a one-line configuration error (exit 2), never a traceback."""
from __future__ import annotations

import configparser
import importlib

import pytest

from lustre_alloc.common.version import __version__
from tests.conftest import PROJECT_ROOT


def _entry_points() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(PROJECT_ROOT / "setup.cfg")
    lines = cfg["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict(tuple(x.strip() for x in line.split("=", 1)) for line in lines)


ENTRY_POINTS = _entry_points()


def _main(target: str):
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def test_every_role_has_an_entry_point():
    assert set(ENTRY_POINTS) == {"lustre-alloc-sim", "lustre-alloc-traces", "lustre-alloc-collector",
                                 "lustre-alloc-broker", "lustre-alloc-mapper", "lustre-alloc-demo",
                                 "lustre-alloc-rebalance", "lustre-alloc-ctl",
                                 "lustre-alloc-selftest"}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_version_flag(name, capsys):
    with pytest.raises(SystemExit) as e:
        _main(ENTRY_POINTS[name])(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"{name} {__version__}"


# commands with sub-commands get a valid one, so the flag is what is wrong
BEFORE_FLAG = {"lustre-alloc-sim": ["list"], "lustre-alloc-ctl": ["status"], "lustre-alloc-traces": ["validate", "x.csv"],
               "lustre-alloc-rebalance": ["plan", "--state", "s", "--files", "f", "--layouts", "l",
                                          "--budget", "0.2"]}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_unknown_flag_is_one_line_exit_2(name, capsys):
    with pytest.raises(SystemExit) as e:
        _main(ENTRY_POINTS[name])([*BEFORE_FLAG.get(name, []), "--no-such-flag"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{name}: error: ") and "--no-such-flag" in err


@pytest.mark.parametrize("name", ["lustre-alloc-collector", "lustre-alloc-broker",
                                  "lustre-alloc-mapper"])
def test_unknown_log_level_is_one_line_exit_2(name, capsys):
    code = _main(ENTRY_POINTS[name])(["--log-level", "verbose"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{name}: error: ")
    assert "'verbose'" in err and "debug, info, warning" in err


def test_missing_sub_command_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        _main(ENTRY_POINTS["lustre-alloc-sim"])([])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "COMMAND" in err


def test_unreadable_config_file_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "mapper.toml"
    bad.write_text("[mapper\n")
    code = _main(ENTRY_POINTS["lustre-alloc-mapper"])(["--config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(bad) in err


def test_demo_with_a_missing_data_file_is_one_line_exit_2(tmp_path, capsys):
    from lustre_alloc.simulator.scenario import SCENARIO_DIR
    text = (SCENARIO_DIR / "paper-32ost.toml").read_text().replace(
        'generator = "hacc"', 'generator = "hacc"\nparams = { hacc_csv = "/nonexistent/hacc.csv.gz" }', 1)
    (tmp_path / "s.toml").write_text(text)
    code = _main(ENTRY_POINTS["lustre-alloc-demo"])(
        ["--scenario", str(tmp_path / "s.toml"), "--workdir", str(tmp_path / "w"), "--no-live",
         "--hours", "1", "--duration", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "/nonexistent/hacc.csv.gz" in err


HELP = [["lustre-alloc-sim"], ["lustre-alloc-sim", "run"], ["lustre-alloc-sim", "validate"],
        ["lustre-alloc-sim", "list"], ["lustre-alloc-sim", "scale"], ["lustre-alloc-traces"],
        ["lustre-alloc-collector"], ["lustre-alloc-broker"], ["lustre-alloc-mapper"],
        ["lustre-alloc-demo"], ["lustre-alloc-rebalance"], ["lustre-alloc-rebalance", "plan"],
        ["lustre-alloc-ctl"], ["lustre-alloc-ctl", "status"], ["lustre-alloc-ctl", "explain"],
        ["lustre-alloc-ctl", "shadow-report"], ["lustre-alloc-ctl", "reload"],
        ["lustre-alloc-selftest"]]


def test_every_command_and_sub_command_is_listed_for_help():
    assert {h[0] for h in HELP} == set(ENTRY_POINTS)


@pytest.mark.parametrize("cmd", HELP, ids=" ".join)
def test_help_without_a_traceback(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        _main(ENTRY_POINTS[cmd[0]])([*cmd[1:], "--help"])
    assert e.value.code == 0
    out = capsys.readouterr()
    assert "usage:" in out.out and "Traceback" not in out.err


def test_a_missing_extra_is_named_in_one_line():
    """As on a collector-only install (no numpy): the simulator says which extra to install."""
    import subprocess
    import sys
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy' or name.startswith('numpy.'):\n"
            "            raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from lustre_alloc.common.entry import sim\n"
            "sys.exit(sim(['list']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=PROJECT_ROOT)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "[sim] extra" in lines[0] and "'numpy'" in lines[0]
    assert "pip install 'lustre-alloc[sim]'" in lines[0]
