"""The docs and the README say only what the code does: every repository path
they name exists, every Python name they cite (``lustre_alloc.mapper.policies.registry.build_policy``)
resolves, every bundled scenario they name is bundled, and every option they show for
one of our commands is an option of that command."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PACKAGES = ("lustre_alloc", "lustre_alloc_data")
COMMANDS = {"lustre-alloc-sim": "lustre_alloc.simulator.cli", "lustre-alloc-traces": "lustre_alloc.traces.cli",
            "lustre-alloc-mapper": "lustre_alloc.mapper.service.cli",
            "lustre-alloc-rebalance": "lustre_alloc.rebalance",
            "lustre-alloc-collector": "lustre_alloc.collectors.cli", "lustre-alloc-broker": "lustre_alloc.collectors.broker_cli",
            "lustre-alloc-demo": "lustre_alloc.livestack.demo"}
TOP = ("bench", "deploy", "docs", "liblustre_alloc", "lustre_alloc", "lustre_alloc_data",
       "scripts", "tests")


def _ticks(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _doc_params() -> list[tuple[str, str]]:
    return [(d.relative_to(ROOT).as_posix(), t) for d in DOCS for t in _ticks(d.read_text())]


def test_named_repository_paths_exist():
    missing = []
    for doc, tick in _doc_params():
        for word in tick.split():
            word = word.strip("(),;:")
            if (word.split("/")[0] in TOP and "/" in word and not any(c in word for c in "*<{$[")
                    and not word.startswith(("results/", "bench/results/"))):   # outputs
                path = word.split("::")[0].split("#")[0]
                built = (ROOT / path).with_suffix(".c").exists()   # a binary `make` builds
                if not (ROOT / path).exists() and not built:
                    missing.append(f"{doc}: {word}")
    assert missing == [], "docs name paths that do not exist:\n" + "\n".join(sorted(set(missing)))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_cited_python_names_resolve():
    bad = []
    for doc, tick in _doc_params():
        for name in re.findall(r"\b((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)" % "|".join(PACKAGES), tick):
            # package.module.name: two parts may be a file or a TOML key (``mapper.key``)
            if "/" in tick or name.endswith((".py", ".toml", ".md")) or name.count(".") < 2:
                continue
            if not _resolves(name):
                bad.append(f"{doc}: {name}")
    assert bad == [], "docs cite names the code does not have:\n" + "\n".join(sorted(set(bad)))


def test_named_bundled_scenarios_exist():
    from lustre_alloc.simulator.scenario import SCENARIO_DIR
    bundled = {p.stem for p in Path(SCENARIO_DIR).glob("*.toml")}
    bad = []
    for d in DOCS:
        for m in re.finditer(r"lustre-alloc-sim (?:run|validate) ([a-z0-9][a-z0-9-]+)(?=[\s`])",
                             d.read_text()):
            if m.group(1) not in bundled:
                bad.append(f"{d.name}: {m.group(1)}")
    assert bad == [], bad


def _help(module: str, sub: str | None) -> str:
    args = [sys.executable, "-m", module] + ([sub] if sub else []) + ["--help"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=120)
    return done.stdout + done.stderr


def _shown_options() -> dict[tuple[str, str | None], set[str]]:
    shown: dict[tuple[str, str | None], set[str]] = {}
    for d in DOCS:
        for line in d.read_text().splitlines():
            for cmd, module in COMMANDS.items():
                m = re.search(re.escape(cmd) + r"((?:\s+[^\s|#`]+)*)", line)
                if not m:
                    continue
                words = m.group(1).split()
                sub = words[0] if words and not words[0].startswith("-") and \
                    words[0].isidentifier() or (words and words[0] in ("import-darshan", "import-lmt")) else None
                opts = {re.split(r"[=\[]", w)[0] for w in words if re.match(r"--[a-z]", w)}
                opts.discard("--version")
                opts.discard("--help")
                if opts:
                    shown.setdefault((cmd, sub), set()).update(opts)
    return shown


@pytest.mark.parametrize("cmd_sub, options", sorted(_shown_options().items(), key=str),
                         ids=lambda v: " ".join(x for x in v if x) if isinstance(v, tuple) else "")
def test_shown_options_are_options_of_their_command(cmd_sub, options):
    cmd, sub = cmd_sub
    text = _help(COMMANDS[cmd], sub)
    unknown = sorted(o for o in options if o not in text)
    assert unknown == [], f"{cmd} {sub or ''}: the docs show options it does not take: {unknown}"


def test_docstring_cross_references_resolve():
    """``:class:``/``:func:``/``:meth:``/``:mod:``/``:data:`` targets in the code's
    docstrings that name a module of ours resolve (a rename leaves none dangling)."""
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            for target in re.findall(r":(?:class|func|meth|mod|data|attr):`~?([A-Za-z_][\w.]*)`", text):
                if target.split(".")[0] in PACKAGES and not _resolves(target):
                    bad.append(f"{path.relative_to(ROOT)}: {target}")
    assert bad == [], "dangling cross-references:\n" + "\n".join(sorted(set(bad)))


_ISSUE = re.compile(r"(?<!/)\b[Ii]ssues? #?\d+|\(#\d+\)|#\d{2}\b")
_HASH = re.compile(r"(?<![0-9A-Za-z_x/.:=-])[0-9a-f]{7,12}(?![0-9A-Za-z_])")


def _reference_docs() -> list[Path]:
    """The docs that describe today's behaviour: the README, docs/ and docs/reference/, not
    docs/history.md (the chronology) nor the generated tables of docs/placement-eval/."""
    return ([ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
            + sorted((ROOT / "docs" / "reference").glob("*.md")))


def test_reference_docs_carry_no_issue_or_commit_numbers():
    found = []
    for doc in _reference_docs():
        if doc.name == "history.md":
            continue
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if "://" in line:
                line = re.sub(r"\S+://\S+", "", line)
            if "lustre-release" in line or "LU-" in line:
                continue            # Lustre's own commits, cited as sources
            hits = _ISSUE.findall(line) + [h for h in _HASH.findall(line)
                                           if re.search(r"\d", h) and re.search(r"[a-f]", h)]
            found += [f"{doc.relative_to(ROOT)}:{n}: {h}" for h in hits]
    assert found == [], "issue or commit numbers outside docs/history.md:\n" + "\n".join(found)


def test_docstrings_cite_sources_not_issue_numbers():
    """The packages' docstrings and comments cite sources and measurements, not the
    project's issue history (that is docs/history.md)."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                line = re.sub(r"\S+://\S+", "", line)
                if re.search(r"(?<!/)\b[Ii]ssues? #?\d+", line):
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    assert found == [], "issue numbers in the code:\n" + "\n".join(found)


def test_no_issue_numbers_in_test_or_bench_docstrings():
    """Tests and benchmarks say what they check, not which ticket asked for it (the tracker's
    numbers mean nothing to a reader of the code; history belongs in commits)."""
    pattern = re.compile(r"[Ii]ssues? #?\d+")
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in ("tests", "bench")
             for p in sorted((ROOT / folder).rglob("*.py")) if p.name != "test_doc_claims.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
