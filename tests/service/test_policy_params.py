"""One policy factory for the service and the simulator; ``[policy.<name>]`` tables in the
mapper's TOML carry policy parameters."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import ConfigError
from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.lustre_qos import LustreQos
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.registry import (PolicyParamError, UnknownPolicyError, build_policy,
                                      policy_param_names)
from lustre_alloc.mapper.service.config import load_config
from lustre_alloc.mapper.service.fs_context import FsContextError
from lustre_alloc.mapper.service.fs_context import gated_policy as service_policy
from lustre_alloc.mapper.service.fs_context import state_store as build_store
from lustre_alloc.simulator import runner
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario

TUNED = """
[mapper]
policy = "mcmf"
fallback = "lustre_qos"

[development]
static_cluster = "2x2"
seed = 3

[policy.mcmf]
predict_k = 2
straggler_factor = 3.0

[policy.mcmf.experimental.cost_params]
load_weight = 0.5

[policy.lustre_qos]
qos_prio_free_pct = 80
"""


def _write(tmp_path, text):
    p = tmp_path / "mapper.toml"
    p.write_text(text)
    return str(p)


def test_policy_tables_reach_the_service_policies(tmp_path):
    config = load_config(_write(tmp_path, TUNED), {})
    assert config.policy_params["mcmf"]["predict_k"] == 2
    gated = service_policy(config, build_store(config))
    assert isinstance(gated, GatedPolicy)
    assert isinstance(gated.primary, McmfPolicy) and isinstance(gated.fallback, LustreQos)
    assert gated.primary.params.predict_k == 2
    assert gated.primary.params.straggler_factor == 3.0
    assert gated.primary.cost_model.load_weight == 0.5
    assert gated.fallback.prio_free == LustreQos(qos_prio_free_pct=80).prio_free


def test_service_and_simulator_build_the_same_policy_from_the_same_params(tmp_path):
    """The scenario's ``[policy_params.mcmf]`` and the mapper's ``[policy.mcmf]`` go
    through the same factory: same classes, same settings."""
    params = {"mcmf": {"predict_k": 2, "straggler_factor": 3.0,
                       "experimental": {"cost_params": {"load_weight": 0.5}}}}
    config = load_config(_write(tmp_path, TUNED), {})
    svc = service_policy(config, build_store(config))
    sc = load_scenario("paper-32ost")
    from dataclasses import replace
    sim = runner.scenario_policy(replace(sc, policy_params=params, seed=3), "mcmf")
    assert isinstance(sim, GatedPolicy)
    for attr in ("predict_k", "straggler_factor", "straggler_min_excess_s", "prune",
                 "pending_half_life_s", "cache_ttl_s", "predict_mode"):
        assert getattr(sim.primary.params, attr) == getattr(svc.primary.params, attr), attr
    assert sim.primary.cost_model == svc.primary.cost_model
    assert type(sim.fallback) is type(svc.fallback)
    assert sim.mds_cpu_limit_percent == svc.mds_cpu_limit_percent


@pytest.mark.parametrize("table, named", [
    ("[policy.mcmf]\npredict_kk = 1\n", "policy.mcmf.predict_kk: unknown parameter"),
    ("[policy.lustre_qos]\nqos_prio_free_pct = 101\n", "policy.lustre_qos: qos_prio_free_pct"),
    ("[policy.mcmf.experimental]\nsolver = \"cplex\"\n", "policy.mcmf: unknown solver 'cplex'"),
    ("[policy.mcmf]\nsolver = \"ortools\"\n",
     "policy.mcmf.solver: an experiment: set it under [policy.mcmf.experimental]"),
    ("[policy.mcmf.experimental]\npredict_k = 2\n",
     "policy.mcmf.experimental.predict_k: not an experiment: set it in [policy.mcmf]"),
    ("[policy.mcmf.experimental]\nbogus = 2\n",
     "policy.mcmf.experimental.bogus: unknown parameter"),
    ("[policy.mcmf]\nexperimental = 3\n", "policy.mcmf.experimental must be a table"),
    ("[policy.mcmf]\nfallback = \"random\"\n", "policy.mcmf.fallback: set it as mapper.fallback"),
    ("[policy.nope]\nx = 1\n", "policy.nope: unknown policy"),
    ("[policy]\nmcmf = 3\n", "policy.mcmf must be a table"),
    ("[mapper]\npolicy_params = {}\n", "write [policy.<name>] tables"),
])
def test_bad_policy_tables_are_refused_with_one_line_naming_the_key(tmp_path, table, named):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, table), {})
    assert named in str(err.value)
    assert "\n" not in str(err.value)


def test_factory_gates_only_what_asks_unless_told():
    assert isinstance(build_policy("mcmf"), GatedPolicy)            # needs_gate
    assert not isinstance(build_policy("round_robin"), GatedPolicy)
    gated = build_policy("round_robin", gate=True, fallback="random")
    assert isinstance(gated, GatedPolicy) and gated.fallback.name == "random"
    assert not isinstance(build_policy("mcmf", gate=False), GatedPolicy)
    table = {"mcmf": {"fallback": "round_robin", "mds_cpu_limit_percent": 50.0}}
    g = build_policy("mcmf", table)
    assert g.fallback.name == "round_robin" and g.mds_cpu_limit_percent == 50.0
    with pytest.raises(UnknownPolicyError):
        build_policy("nope")
    with pytest.raises(PolicyParamError, match="random.bogus"):
        build_policy("random", {"random": {"bogus": 1}})


def test_mcmf_flow_takes_the_mcmf_parameters():
    assert policy_param_names("mcmf_flow") == policy_param_names("mcmf")
    assert policy_param_names("round_robin") == ()


def test_service_reports_a_bad_policy_as_a_service_error(tmp_path):
    config = load_config(_write(tmp_path, "[development]\nstatic_cluster = \"1x2\"\n"), {})
    config.policy = "nope"
    with pytest.raises(FsContextError, match="unknown policy 'nope'"):
        service_policy(config, build_store(config))


def test_scenario_refuses_an_unknown_policy_parameter(tmp_path):
    src = load_scenario("paper-32ost").path.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace("[cluster]", "[policy_params.mcmf]\npredict_kk = 1\n\n[cluster]", 1))
    with pytest.raises(ScenarioError, match="policy_params.mcmf.predict_kk: unknown parameter"):
        load_scenario(bad)


def test_the_operations_doc_example_and_the_systemd_example_load(tmp_path):
    """docs/operations.md "Tuning the policy" and mapper.toml.example stay valid."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs/operations.md").read_text()
    section = doc.split("## Tuning the policy", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    config = load_config(_write(tmp_path, block), {"static_cluster": "2x2"})
    assert config.policy_params["mcmf"]["straggler_factor"] == 3.0
    service_policy(config, build_store(config))
    example = (root / "lustre_alloc/mapper/service/systemd/mapper.toml.example").read_text()
    uncommented = example.replace("# [policy.", "[policy.").replace("# predict_k", "predict_k")
    uncommented = uncommented.replace("# qos_prio_free_pct", "qos_prio_free_pct")
    config = load_config(_write(tmp_path, uncommented), {"static_cluster": "2x2"})
    assert config.policy_params["lustre_qos"] == {"qos_prio_free_pct": 90}


def test_cli_help_names_the_configured_defaults():
    """The help text takes its numbers from MapperConfig (it once said a 0.002 s budget
    while the default was 0.010 s)."""
    from lustre_alloc.mapper.service.cli import build_parser
    from lustre_alloc.mapper.service.config import MapperConfig
    text = " ".join(build_parser().format_help().split())
    d = MapperConfig()
    assert f"s ({d.round_budget_s:g})" in text and "0.002" not in text
    assert f"(default {d.policy})" in text and f"(default {d.fallback})" in text


def test_setting_an_experiment_loads_with_a_warning_naming_it(tmp_path, caplog):
    text = "[policy.mcmf]\npredict_k = 1\n\n[policy.mcmf.experimental]\ncache_ttl_s = 2.0\n"
    with caplog.at_level("WARNING", logger="lustre_alloc.mapper.service.config"):
        config = load_config(_write(tmp_path, text), {"static_cluster": "2x2"})
    assert service_policy(config, build_store(config)).primary.params.cache_ttl_s == 2.0
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "experimental_setting"]
    assert "policy.mcmf.experimental.cache_ttl_s" in record.getMessage()


def test_every_admin_setting_is_in_the_example_and_the_operations_doc():
    """The admin's [policy.mcmf] is a handful of settings, each described where an admin
    reads (mapper.toml.example and docs/operations.md), and so is every [mapper] key."""
    import dataclasses
    import re
    from pathlib import Path
    from lustre_alloc.mapper.policies.mcmf.params import ADMIN_SETTINGS
    from lustre_alloc.mapper.service.config import MapperConfig
    root = Path(__file__).resolve().parents[2]
    example = (root / "lustre_alloc/mapper/service/systemd/mapper.toml.example").read_text()
    ops = (root / "docs/operations.md").read_text()
    assert len(ADMIN_SETTINGS) <= 8
    for key in [*ADMIN_SETTINGS, *(f.name for f in dataclasses.fields(MapperConfig))]:
        assert re.search(rf"\b{key}\b", example), f"{key}: not in mapper.toml.example"
        assert re.search(rf"\b{key}\b", ops), f"{key}: not in docs/operations.md"
