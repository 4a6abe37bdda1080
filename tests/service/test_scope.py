"""The admin's ``[scope]``: requests outside it are answered EPERM (the shim then
uses Lustre's allocator), counted, and everything inside is placed as before; a bad table
names its key; a reload changes the scope of a running mapper."""
from __future__ import annotations

import errno

import pytest

from lustre_alloc.common.errors import ConfigError
from lustre_alloc.mapper.service.client import LeaseRefused, MapperClient, MapperError, ShadowDecision
from lustre_alloc.mapper.service.scope import SHADOW, Scope
from tests.support import wait_for

from .conftest import make_service


def test_rules():
    s = Scope.from_table({"paths": ["/lustre/scratch/climate/"],
                          "exclude_paths": ["/lustre/scratch/climate/tmp"],
                          "pools": ["flash", ""], "jobids": ["hacc*", "ior.*"],
                          "exclude_jobids": ["*.debug"], "fsnames": {"scratch2": False}})
    ok = dict(fsname="scratch", path="/lustre/scratch/climate/run1/f", pool=None, jobid="hacc.7")
    assert s.why_not(**ok) is None
    assert s.why_not(**{**ok, "pool": "flash"}) is None
    assert "scope.paths" in s.why_not(**{**ok, "path": "/lustre/scratch/climatex/f"})
    assert "scope.paths" in s.why_not(**{**ok, "path": ""})
    assert "exclude_paths" in s.why_not(**{**ok, "path": "/lustre/scratch/climate/tmp/a"})
    assert "scope.pools" in s.why_not(**{**ok, "pool": "disk"})
    assert "scope.jobids" in s.why_not(**{**ok, "jobid": "vasp.1"})
    assert "exclude_jobids" in s.why_not(**{**ok, "jobid": "ior.debug"})
    assert "scratch2" in s.why_not(**{**ok, "fsname": "scratch2"})
    assert "scope.place" in Scope(place=False).why_not(**ok)
    assert Scope().why_not(**{**ok, "path": ""}) is None           # empty lists: everything


@pytest.mark.parametrize("table, key", [({"paths": ["relative/dir"]}, "scope.paths"),
                                        ({"jobids": "hacc*"}, "scope.jobids"),
                                        ({"place": "yes"}, "scope.place"),
                                        ({"fsnames": {"a": 1}}, "scope.fsnames"),
                                        ({"users": [1]}, "scope.users")])
def test_bad_tables_name_the_key(table, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Scope.from_table(table)


def test_out_of_scope_requests_get_eperm_and_are_counted():
    svc = make_service(static_cluster="4x2", policy="round_robin",
                       scope={"paths": ["/lustre/in"], "jobids": ["app*"]})
    try:
        with MapperClient(svc.endpoint, timeout_s=2.0) as c:
            assert len(c.alloc("app.1", 2, path="/lustre/in/f").osts) == 2
            for job, path in (("app.1", "/lustre/out/f"), ("other.1", "/lustre/in/f")):
                with pytest.raises(MapperError) as exc:
                    c.alloc(job, 2, path=path)
                assert exc.value.errno == errno.EPERM and "placement scope" in str(exc.value)
        assert svc.metrics.registry.get_sample_value(
            "lustre_alloc_mapper_requests_total", {"result": "out_of_scope"}) == 2
        assert svc.metrics.registry.get_sample_value(
            "lustre_alloc_mapper_requests_total", {"result": "ok"}) == 1
    finally:
        svc.stop()


def test_a_reload_changes_the_scope(tmp_path):
    from lustre_alloc.mapper.service.reload import Reloader
    toml = tmp_path / "mapper.toml"
    toml.write_text('[development]\nstatic_cluster = "4x2"\n[mapper]\npolicy = "round_robin"\n'
                    'bind = "tcp://127.0.0.1:*"\n')
    from lustre_alloc.mapper.service.config import load_config
    from lustre_alloc.mapper.service.server import MapperService
    svc = MapperService(load_config(str(toml), {})).start()
    svc.reloader = Reloader(svc, str(toml), {})
    try:
        with MapperClient(svc.endpoint, timeout_s=2.0) as c:
            assert c.alloc("app.1", 1, path="/x/f").osts
            toml.write_text(toml.read_text() + "\n[scope]\nplace = false\n")
            svc.reloader.request()
            wait_for(lambda: svc.reloader.applied, 10, "the reload applied")
            with pytest.raises(MapperError) as exc:
                c.alloc("app.1", 1, path="/x/f")
            assert exc.value.errno == errno.EPERM and "scope.place" in str(exc.value)
        # counted, for the LustreAllocScopeChanged alert
        assert svc.metrics.registry.get_sample_value(
            "lustre_alloc_mapper_scope_changes_total") == 1
    finally:
        svc.stop()


def test_a_reload_out_of_shadow_places_allocs_and_leases_at_once(tmp_path):
    """Rollout step 2 (docs/operations.md): the reload that ends a shadow pilot places the
    next create, per create and leased alike (one scope in force for every request path)."""
    from lustre_alloc.mapper.service.config import load_config
    from lustre_alloc.mapper.service.reload import Reloader
    from lustre_alloc.mapper.service.server import MapperService
    toml = tmp_path / "mapper.toml"
    base = ('[development]\nstatic_cluster = "4x2"\n[mapper]\npolicy = "round_robin"\n'
            'bind = "tcp://127.0.0.1:*"\n')
    toml.write_text(base + "[scope]\nshadow = true\n")
    svc = MapperService(load_config(str(toml), {})).start()
    svc.reloader = Reloader(svc, str(toml), {})
    try:
        with MapperClient(svc.endpoint, timeout_s=2.0) as c:
            with pytest.raises(ShadowDecision):
                c.alloc("app.1", 1, path="/x/f")
            with pytest.raises(LeaseRefused) as shadow:
                c.lease(4, "app.1", 1, path="/x")
            assert shadow.value.per_create
            toml.write_text(base + "[scope]\nshadow = false\n")
            svc.reloader.request()
            wait_for(lambda: svc.reloader.applied, 10, "the reload applied")
            assert c.alloc("app.1", 1, path="/x/f").osts
            assert len(c.lease(4, "app.1", 1, path="/x").layouts) == 4
    finally:
        svc.stop()


def test_uid_gid_and_project_rules():
    from lustre_alloc.mapper.service.scope import Scope
    from lustre_alloc.mapper.service.wire import Owner
    s = Scope.from_table({"uids": [20001], "gids": [5000, 5001], "projids": [42]})
    assert s.why_not("fs", "/l/f", None, "j", Owner(20001, 5001, 42)) is None
    assert s.why_not("fs", "/l/f", None, "j", Owner(20002, 5001, 42)) == \
        "uid 20002 not in scope.uids"
    assert s.why_not("fs", "/l/f", None, "j", Owner(20001, 5001, 0)) == \
        "projid 0 not in scope.projids"
    # an old client sends none: left to Lustre, never placed by guess
    assert s.why_not("fs", "/l/f", None, "j", None) == "request carries no uid (scope.uids)"
    assert Scope.from_table({}).why_not("fs", "/l/f", None, "j", None) is None
    for bad in ({"uids": [-1]}, {"gids": ["5000"]}, {"projids": [True]}, {"uids": 7}):
        with pytest.raises(ConfigError, match=f"scope.{next(iter(bad))} must be a list of integers"):
            Scope.from_table(bad)


def test_the_service_scopes_by_uid_through_the_wire():
    from lustre_alloc.mapper.service.wire import Owner
    svc = make_service(static_cluster="4x2", policy="round_robin",
                       scope={"uids": [1000], "projids": [7]})
    try:
        with MapperClient(svc.endpoint, timeout_s=2.0) as c:
            assert c.alloc("app.1", 1, path="/x/f", owner=Owner(1000, 100, 7)).osts
            with pytest.raises(MapperError) as exc:
                c.alloc("app.1", 1, path="/x/f", owner=Owner(1001, 100, 7))
            assert exc.value.errno == errno.EPERM and "uid 1001 not in scope.uids" in exc.value.reason
    finally:
        svc.stop()


@pytest.mark.parametrize("table", ["Scope", "scop", "stear"])
def test_a_misspelled_table_is_refused_at_start_and_at_reload(tmp_path, table):
    """A shadow pilot whose [scope] is misspelled would place every file live: the name
    is refused in one line, at start (exit 2) and at reload (the running config stays)."""
    import subprocess
    import sys
    import time
    from lustre_alloc.mapper.service.config import load_config
    from lustre_alloc.mapper.service.reload import Reloader
    from lustre_alloc.mapper.service.server import MapperService
    base = ('[development]\nstatic_cluster = "4x2"\n[mapper]\npolicy = "round_robin"\n'
            'bind = "tcp://127.0.0.1:*"\n\n[scope]\nshadow = true\n')
    bad = tmp_path / "bad.toml"
    bad.write_text(base + f"\n[{table}]\nshadow = false\n")
    with pytest.raises(ConfigError, match=rf"unknown table or key \[{table}\]"):
        load_config(str(bad), {})
    proc = subprocess.run([sys.executable, "-m", "lustre_alloc.mapper.service.cli", "--config", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and f"[{table}]" in proc.stderr
    good = tmp_path / "mapper.toml"
    good.write_text(base)
    svc = MapperService(load_config(str(good), {})).start()
    svc.reloader = Reloader(svc, str(good), {})
    try:
        good.write_text(base + f"\n[{table}]\nshadow = false\n")
        svc.reloader.request()
        wait_for(lambda: svc.reloader.rejected, 10, "the reload rejected")
        assert svc.reloader.rejected == 1 and svc.reloader.applied == 0
        assert svc.intake.scope.mode(svc.only().fsname) == SHADOW      # still the pilot
    finally:
        svc.stop()


def test_the_packaged_configuration_starts_in_shadow():
    from pathlib import Path
    from lustre_alloc.mapper.service.config import load_config
    example = Path(__file__).resolve().parents[2] / "lustre_alloc/mapper/service/systemd/mapper.toml.example"
    config = load_config(str(example), {"static_cluster": "2x2", "require_curve": False})
    assert config.scope_rules().mode("") == SHADOW
