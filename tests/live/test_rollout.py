"""docs/operations.md's rollout guide, walked on the live stack: emulated OSSes and MDS (the
emulated MDS places every file left to Lustre and writes its layout where the shim reads it
back for a shadow report), real collector, broker and mapper processes, real programs under
the shim, ``lustre-alloc-ctl`` against the mapper's admin socket.

Shadow pilot, shadow report, one directory, one project, the default, the fallback alert
when the collectors stop, and the step back. Each step's commands and their output are kept
as a transcript; the guide's rehearsal block (docs/operations.md, "Rehearsing the rollout
without Lustre") must show what this run printed, line for line once numbers and the
scratch directory are normalised."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from lustre_alloc.mapper.service import ctl
from tests.support import wait_for

from .conftest import Live

pytestmark = pytest.mark.timeout(300)

PROJECT = Path(__file__).resolve().parents[2]
RULES = PROJECT / "deploy/prometheus/lustre-alloc.rules.yml"
GUIDE = PROJECT / "docs/operations.md"
SCRATCH = "/lustre/scratch"
"""What the run's data directory is shown as in the guide."""
FILES = 12


class Rehearsal:
    """One walk: the live stack, ``lustre-alloc-ctl`` on its socket, the transcript."""

    def __init__(self, lv: Live, sock: str, capsys):
        self.lv, self.sock, self.capsys = lv, sock, capsys
        self.transcript: list[tuple[str, list[str]]] = []

    def ctl(self, *args: str) -> tuple[int, str]:
        code = ctl.main(["--socket", self.sock, *args])
        out = self.capsys.readouterr()
        text = (out.out + out.err).rstrip("\n")
        self.transcript.append((("lustre-alloc-ctl " + " ".join(args)).replace(
                                    str(self.lv.data), SCRATCH),
                                text.replace(str(self.lv.data), SCRATCH).splitlines()))
        return code, text

    def note(self, text: str) -> None:
        """A comment line in the transcript (what the admin did between commands)."""
        self.transcript.append(("# " + text.replace(str(self.lv.data), SCRATCH), []))

    def scope(self, **table) -> str:
        """``[scope]`` rewritten in mapper.toml and ``lustre-alloc-ctl reload``."""
        self.lv.stack.scope = table
        self.lv.stack.mapper_config()
        shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
        self.note(f"mapper.toml [scope]: {shown or '(empty)'}")
        code, text = self.ctl("reload")
        assert code == 0, text
        return text

    def write(self, name: str, linger_s: float = 0.0) -> list[dict[str, str]]:
        """A job ``name`` creating :data:`FILES` files in ``data/<name>``, living
        ``linger_s`` past its last create; its records."""
        proc = self.lv.writer(name, FILES, 0.02, delay_s=0.2, linger_s=linger_s,
                              LUSTRE_ALLOC_STRIPE_COUNT="2")
        result = self.lv.writer_result(name, proc)
        assert result["returncode"] == 0 and result.get("errors", 0) == 0, result
        recs = [r for r in self.lv.records() if r["path"].startswith(f"{self.lv.data}/{name}/")]
        assert len(recs) == FILES
        return recs

    def metric(self, name: str, **labels: str) -> float:
        """The mapper's samples of ``name`` with these labels, summed."""
        want = [f'{k}="{v}"' for k, v in labels.items()]
        return sum(v for k, v in self.lv.stack.metrics().items()
                   if k.split("{")[0] == name and all(w in k for w in want))

    def stripes(self) -> float:
        return self.metric("lustre_alloc_mapper_ost_stripes_total")

    def wait(self, cond, what: str) -> None:
        """Until ``cond()`` holds (a generous bound for a loaded machine; not a timing)."""
        wait_for(cond, timeout_s=30.0, what=what)


def _rule(name: str) -> dict:
    rules = yaml.safe_load(RULES.read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name]
    return rule


def _threshold(rule: dict) -> float:
    return float(re.search(r"[<>]\s*([0-9.]+)\s*(\*|$)", rule["expr"].strip()).group(1))


def _placed(recs: list[dict[str, str]]) -> bool:
    assert {(r["result"], r["policy"]) for r in recs} == {("layout", "mcmf")}, \
        {(r["result"], r["policy"], r["reason"]) for r in recs}
    return True


def _lustre(recs: list[dict[str, str]]) -> bool:
    return all(r["result"] == "default" for r in recs)


def test_the_rollout_guide_walked_on_the_emulated_stack(live, tmp_path, capsys):
    sock = f"ipc://{tmp_path}/control"
    # the emulated OSTs are alike: by default the mapper would leave the pilot's leased
    # creates to Lustre's allocator (docs/operations.md, "Rehearsing the rollout without
    # Lustre"); the rehearsal shows its own decisions
    lv = live(policy="mcmf", scope={"shadow": True}, mapper_settings={"control_endpoint": sock},
              policy_params={"mcmf": {"alike_to_lustre": False}})
    r = Rehearsal(lv, sock, capsys)

    # 1. shadow pilot: every file gets Lustre's layout, the shim reports it, nothing booked
    # (its writer lives 1 s past its last create: the emulated MDS places a file up to a
    # pump period after its create, and a process's exit waits at most 0.2 s for reports)
    r.note("job app.1 writes 12 files under the shim")
    recs = r.write("app.1", linger_s=1.0)
    assert {(x["result"], x["reason"]) for x in recs} == {("default", "mapper_shadow")}
    r.wait(lambda: r.metric("lustre_alloc_mapper_shadow_reports_total", result="ok") == FILES,
           "every shadow decision reported")
    code, text = r.ctl("shadow-report", "--window", "3600")
    assert code == 0 and f"decisions {FILES}, reported by the shim {FILES}, unreported 0" in text
    code, text = r.ctl("status")
    assert code == 0 and "mode shadow, policy mcmf" in text
    assert f"shadow (last hour): {FILES} decisions, {FILES} reported" in text
    assert r.stripes() == 0
    # LustreAllocShadowReportsMissing stays quiet: reports / shadow decisions above its share
    share = _threshold(_rule("LustreAllocShadowReportsMissing"))
    assert (r.metric("lustre_alloc_mapper_shadow_reports_total", result="ok")
            >= share * r.metric("lustre_alloc_mapper_requests_total", result="shadow"))

    # 2. one directory: that tree is placed, everything else goes to Lustre as before
    text = r.scope(shadow=False, paths=[str(lv.data / "pilot")])
    assert text == "reload applied (changed: scope)"
    assert r.metric("lustre_alloc_mapper_scope_changes_total") == 1  # LustreAllocScopeChanged
    r.note("jobs pilot (in /lustre/scratch/pilot) and app.2 (elsewhere) write 12 files each")
    pilot, other = r.write("pilot"), r.write("app.2")
    assert _placed(pilot) and _lustre(other)
    # the stripe counters count the files created (leased layouts included), two stripes each
    r.wait(lambda: r.stripes() == 2 * FILES, "stripes counted when the leases come back")
    code, text = r.ctl("explain", "--path", pilot[-1]["path"])
    chosen = ", ".join(f"OST{int(i):04x}" for i in pilot[-1]["osts"].split(","))
    assert code == 0 and f"chosen: {chosen}" in text and ": place by mcmf" in text
    code, text = r.ctl("explain", "--path", other[-1]["path"])
    assert code == 1 and "no decision remembered" in text

    # 3. one project, by its jobids: placed wherever it writes
    r.scope(jobids=["climate.*"])
    r.note("jobs climate.7 and app.3 write 12 files each")
    climate, other = r.write("climate.7"), r.write("app.3")
    assert _placed(climate) and _lustre(other)

    # 4. the default: everything the shim asks for
    r.scope()
    r.note("job app.4 writes 12 files")
    assert _placed(r.write("app.4"))
    r.wait(lambda: r.stripes() == 2 * 3 * FILES, "every placed file's stripes counted")
    code, text = r.ctl("status")
    assert code == 0 and "scope in force: live" in text and "mode place, policy mcmf" in text

    # 5. the collectors stop: the state goes stale, the fallback decides, and the shipped
    # alerts on stale servers and on the fallbacks' share fire
    before = {res: r.metric("lustre_alloc_mapper_layouts_total", result=res)
              for res in ("ok", "fallback")}
    r.note("every collector stops; job app.5 writes 12 files")
    for name in [n for n in lv.stack.procs if n not in ("mapper", "broker")]:
        lv.stack.kill(name)
    r.wait(lambda: r.metric("lustre_alloc_mapper_stale_servers") > 0, "stale servers seen")
    late = r.write("app.5")
    assert {x["result"] for x in late} == {"layout"} and {x["policy"] for x in late} == \
        {"lustre_qos"}
    grown = {res: r.metric("lustre_alloc_mapper_layouts_total", result=res) - before[res]
             for res in before}
    assert grown["fallback"] / (grown["ok"] + grown["fallback"]) > \
        _threshold(_rule("LustreAllocFallbacksRising"))
    code, text = r.ctl("status")
    assert code == 0 and re.search(r"fallback rounds: .*stale \d+", text), text

    # step back: place = false, every create goes to Lustre's allocator at once
    r.scope(place=False)
    r.note("job app.6 writes 12 files: every one gets Lustre's layout")
    assert _lustre(r.write("app.6"))
    r.ctl("status")
    # every stripe counted is a stripe of a file created with the mapper's layout
    stripes = Counter(i for x in lv.records() if x["result"] == "layout"
                      for i in x["osts"].split(","))
    r.wait(lambda: r.stripes() == sum(stripes.values()) == 2 * 4 * FILES,
           "the fallback's layouts counted too")
    (tmp_path / "rollout-transcript.txt").write_text(_render(r.transcript))
    _check_guide(r.transcript)


def _render(transcript: list[tuple[str, list[str]]]) -> str:
    return "".join((cmd if cmd.startswith("#") else f"$ {cmd}") + "\n"
                   + "".join(f"{line}\n" for line in out) for cmd, out in transcript)


def _shape(line: str) -> str:
    """A line with its numbers (and OST names' hex) as ``N``: what two runs share."""
    line = re.sub(r"OST[0-9a-f]{4}", "OSTN", line)
    line = re.sub(r"tcp://[0-9.:]+", "tcp://ADDR", line)
    return re.sub(r"-?\d+(\.\d+)?", "N", line).rstrip()


def _guide_block() -> list[tuple[str, list[str]]]:
    text = GUIDE.read_text()
    head = text.index("### Rehearsing the rollout without Lustre")
    block = text[text.index("```", head) + 3:]
    block = block[block.index("\n") + 1:block.index("```")]
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip() != "..." and not line.startswith("#"):
            out[-1][1].append(line)
    return out


def _check_guide(transcript: list[tuple[str, list[str]]]) -> None:
    """Every command of the guide's block ran, in this order, and each output line the
    guide shows is one this run printed for it (numbers aside)."""
    guide = _guide_block()
    assert guide, "the guide's rehearsal block is empty"
    ran = iter([(cmd, out) for cmd, out in transcript if not cmd.startswith("#")])
    for cmd, lines in guide:
        for got_cmd, got in ran:
            if _shape(got_cmd) == _shape(cmd):
                shapes = {_shape(x) for x in got}
                missing = [x for x in lines if _shape(x) not in shapes]
                assert not missing, f"{cmd}: the guide shows lines this run did not print: " \
                                    f"{missing}"
                break
        else:
            raise AssertionError(f"the guide's command {cmd!r} was not run in this order")
