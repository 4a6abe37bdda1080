"""What one create costs the MDS: RPCs per create by type, plain, llapi and under the shim.

Runs in the lustre-vm guest (docs/lustre-vm.md, "What a create costs the MDS")::

    bash scripts/lustre-vm.sh run -- python /src/bench/lustre_vm_create_rpcs.py

The broker, collectors and mapper run in the guest (``RealLustreStack``, the settings of
bench/lustre_vm_placement.py). ``bench/lustre_create_anchor.c`` is built against the guest's
liblustreapi and creates ``--files`` files (empty, and ``--mib`` MiB written) in a fresh
directory per row, four ways:

* **plain**: ``open(O_CREAT|O_EXCL)``, write, close, bare: Lustre's own cost (2 RPCs).
* **llapi anchor**: ``llapi_layout_file_create()`` naming the OST (``i % osts``): what a
  program that sets its own layout pays, the bar for the shim.
* **shim, per create**: the plain program under the shim, ``LUSTRE_ALLOC_LEASE=0`` (one
  mapper request per create).
* **shim, leased**: the same with leases (the default).

Per row: the client's ``mdc.*.stats`` and the MDT's ``mdt.*.md_stats`` before and after
(read with the collectors' parser, lustre_alloc/collectors/readers/stats_file.py), their
difference over the files: RPCs per create by type; the row's creates/s and its ratio to
plain in the same round. Rows rotate over ``--rounds`` rounds. Then ``--steps``: the shim's
create sequence one system call at a time (``lustre_create_anchor steps``), the RPCs each
step sent. Then mdtest ``-F -C`` with 2 ranks, bare and under the shim (per create, leased),
when mdtest and mpirun are installed (lustre-vm.sh builds them from hpc/ior).

Writes ``$OUT/create-rpcs.json`` and prints the tables; bench/lustre_vm_report.py renders
nothing of it (docs/lustre-vm.md quotes the committed JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.collectors.readers.stats_file import parse_stats  # noqa: E402
from lustre_alloc.livestack.real_lustre import RealLustreStack  # noqa: E402

SHIM = ROOT / "liblustre_alloc" / "liblustre_alloc.so"
ANCHOR = ROOT / "bench" / "lustre_create_anchor.c"
MAPPER = {"mds_cpu_limit_percent": 100.0, "round_budget_s": 0.25}
"""As bench/lustre_vm_placement.py (its MAPPER): gates that read the emulated guest."""
ROWS = ("plain", "llapi", "shim_per_create", "shim_leased")
GAUGES = {"req_waittime", "req_active", "req_qdepth"}
"""Counters of mdc.*.stats that are not RPCs of a type (times, queue gauges); every other
counter is an RPC opcode (``mds_getattr_lock`` too: a getattr by name)."""


def lctl(*args: str) -> str:
    return subprocess.run(["lctl", *args], check=True, capture_output=True, text=True).stdout


def counts(text: str) -> dict[str, int]:
    """Samples per counter of one stats file's text (the collectors' parser)."""
    snap = parse_stats(text)
    return {name: int(c.samples) for name, c in snap.counters.items()}


def mdc_stats() -> dict[str, int]:
    """The client's RPCs to the MDS by type, summed over its MDCs."""
    total: dict[str, int] = {}
    # by name, not path: 2.15.8's lctl answers "list_param -p mdc.*.stats" with exit 4
    for dev in lctl("get_param", "-N", "mdc.*.stats").split():
        for k, v in counts(lctl("get_param", "-n", dev)).items():
            if k not in GAUGES:
                total[k] = total.get(k, 0) + v
    return total


def md_stats() -> dict[str, int]:
    """The MDT's metadata operations by type, summed over its MDTs."""
    total: dict[str, int] = {}
    for dev in lctl("get_param", "-N", "mdt.*.md_stats").split():
        for k, v in counts(lctl("get_param", "-n", dev)).items():
            total[k] = total.get(k, 0) + v
    return total


def delta(after: dict[str, int], before: dict[str, int], n: int) -> dict[str, float]:
    return {k: round((v - before.get(k, 0)) / n, 3) for k, v in sorted(after.items())
            if v - before.get(k, 0) > 0}


def build_anchor(into: Path) -> Path:
    exe = into / "lustre_create_anchor"
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(exe), str(ANCHOR), "-llustreapi"],
                   check=True)
    return exe


def run_row(exe: Path, row: str, directory: Path, n: int, size: int, osts: int,
            plain_env: dict, shim_env: dict) -> dict:
    directory.mkdir()
    mode = "llapi" if row == "llapi" else "plain"
    env = plain_env if row in ("plain", "llapi") else dict(
        shim_env, LUSTRE_ALLOC_LEASE="0" if row == "shim_per_create" else "1")
    before_c, before_s = mdc_stats(), md_stats()
    t0 = time.monotonic()
    subprocess.run([str(exe), mode, str(directory), str(n), str(size), str(osts)], env=env,
                   check=True, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - t0
    out = {"row": row, "bytes": size, "files": n, "seconds": seconds,
           "creates_per_s": n / seconds, "mdc_per_create": delta(mdc_stats(), before_c, n),
           "md_stats_per_create": delta(md_stats(), before_s, n)}
    # the guest's OSTs are 2 GiB each: a run of rows would fill them (a run hung there)
    shutil.rmtree(directory)
    out["mdc_rpcs_per_create"] = round(sum(out["mdc_per_create"].values()), 3)
    return out


def run_steps(exe: Path, directory: Path, n: int, osts: int, plain_env: dict) -> list[dict]:
    """The shim's create sequence one call at a time: RPCs per file of each step."""
    directory.mkdir()
    stats = lctl("list_param", "-p", "mdc.*.stats").split()[0]   # a path: the C reads it
    p = subprocess.run([str(exe), "steps", str(directory), str(n), "0", str(osts), stats],
                       env=plain_env, check=True, capture_output=True, text=True)
    steps: dict[int, dict] = {}
    for line in p.stdout.splitlines():
        if line.startswith("step\t"):
            _, k, name, counter, value = line.split("\t")
            if counter in GAUGES:
                continue
            s = steps.setdefault(int(k), {"step": name, "rpcs_per_file": {}})
            s["rpcs_per_file"][counter] = round(int(value) / n, 3)
    return [steps[k] for k in sorted(steps)]


VARIANTS = ("", "s", "x", "g", "p", "ps", "psx", "psxg", "q", "qsx")
"""create_variant()'s parts (bench/lustre_create_anchor.c): '' is llapi's sequence by hand
(create by path, v1 layout with the start OST, but the SETSTRIPE ioctl where llapi sets the
``lustre.lov`` xattr); 'psx' the shim's before, 'qsx' now."""


def run_variants(exe: Path, base: Path, n: int, osts: int, plain_env: dict) -> dict:
    """MDS RPCs per create of each part-switched create (no mapper: the parts alone)."""
    out = {}
    for how in VARIANTS:
        d = base / f"variant-{how or 'none'}"
        d.mkdir()
        before = mdc_stats()
        subprocess.run([str(exe), "variant", str(d), str(n), "0", str(osts), how],
                       env=plain_env, check=True, capture_output=True, text=True)
        per = delta(mdc_stats(), before, n)
        out[how or "none"] = {"mdc_per_create": per, "total": round(sum(per.values()), 3)}
        print(json.dumps({"variant": how or "none", **out[how or "none"]}), flush=True)
    return out


def mdtest(directory: Path, n: int, env: dict) -> dict | None:
    """mdtest -F -C, 2 ranks: its file creation rate (max, min, mean; creates/s)."""
    mdt, mpirun = shutil.which("mdtest"), shutil.which("mpirun")
    if not (mdt and mpirun):
        return None
    directory.mkdir()
    exports = [a for k in env if k == "LD_PRELOAD" or k.startswith("LUSTRE_ALLOC_")
               for a in ("-x", k)]
    before = mdc_stats()
    p = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                        *exports, mdt, "-F", "-C", "-n", str(n), "-d", str(directory)],
                       env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    m = re.search(r"File creation\s*:?\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)", p.stdout)
    return {"creates_per_s_max_min_mean": [float(x) for x in m.groups()] if m else None,
            "mdc_per_create": delta(mdc_stats(), before, 2 * n),
            "summary": [line for line in p.stdout.splitlines() if "File " in line]}


LABELS = {"plain": "plain", "llapi": "llapi anchor", "shim_per_create": "shim, per create",
          "shim_leased": "shim, leased"}


def report(paths: list[Path]) -> str:
    """Markdown tables of committed results (one per file, in order): per row and size,
    MDS RPCs per create by type (mean over rounds), creates/s (median) and its ratio to
    plain in the same round (median); then each file's step-by-step and mdtest."""
    import statistics
    out: list[str] = []
    for path in paths:
        d = json.loads(path.read_text())
        out += [f"**{path.name}** (Lustre {d['lustre']}, {d['args']['files']} files a row, "
                f"{d['args']['rounds']} rounds)", "",
                "| row | bytes | MDS RPCs per create (client mdc stats, by type) | total | "
                "creates/s (median) | / plain (median of rounds) |", "|---|---|---|---|---|---|"]
        plain = {(r["round"], r["bytes"]): r["creates_per_s"] for r in d["rows"]
                 if r["row"] == "plain"}
        for size in sorted({r["bytes"] for r in d["rows"]}):
            for row in ROWS:
                rs = [r for r in d["rows"] if r["row"] == row and r["bytes"] == size]
                if not rs:
                    continue
                types = sorted({k for r in rs for k in r["mdc_per_create"]})
                mean = {k: statistics.fmean(r["mdc_per_create"].get(k, 0.0) for r in rs)
                        for k in types}
                shown = ", ".join(f"{k} {v:.2f}" for k, v in mean.items() if v >= 0.05)
                ratio = statistics.median(r["creates_per_s"] / plain[(r["round"], size)]
                                          for r in rs)
                out.append(f"| {LABELS[row]} | {size} | {shown} | {sum(mean.values()):.2f} | "
                           f"{statistics.median(r['creates_per_s'] for r in rs):.1f} | "
                           f"{ratio:.2f} |")
        out += ["", "The shim's create one call at a time (RPCs per file):", ""]
        out += [f"- {s['step']}: " + (", ".join(f"{k} {v:.2f}" for k, v in
                                                 s["rpcs_per_file"].items()
                                                 if k not in ("snapshot_time", "elapsed_time")
                                                 and v >= 0.05) or "none")
                for s in d["steps"]]
        out += ["", "mdtest -F -C, 2 ranks:", ""]
        for name, res in d["mdtest"].items():
            if not res:
                out.append(f"- {name}: not run (no mdtest)")
                continue
            rates = res.get("creates_per_s_max_min_mean")
            total = sum(res.get("mdc_per_create", {}).values())
            out.append(f"- {name}: {total:.2f} MDS RPCs per create"
                       + (f", {rates[2]:.1f} creates/s (mean of ranks' runs)" if rates else ""))
        out.append("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", nargs="+", type=Path,
                    help="print markdown tables of these result files instead of running")
    ap.add_argument("--mount", default=os.environ.get("LUSTRE_MOUNT", "/mnt/lustre"))
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--mib", type=int, default=1, help="MiB written per file in the written rows")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--osts", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50, help="files of the step-by-step run")
    ap.add_argument("--mdtest-files", type=int, default=100, help="files per mdtest rank")
    ap.add_argument("--variants-only", action="store_true",
                    help="only the part-switched creates (which part of the shim's create "
                         "costs an RPC), no stack")
    args = ap.parse_args()
    if args.report:
        print(report(args.report))
        return 0
    out = Path(os.environ.get("OUT", tempfile.mkdtemp()))
    plain_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("LUSTRE_ALLOC_") and k != "LD_PRELOAD"}
    base = Path(args.mount) / f"create-rpcs-{os.getpid()}"
    base.mkdir()
    if args.variants_only:
        with tempfile.TemporaryDirectory() as tmp:
            res = run_variants(build_anchor(Path(tmp)), base, args.steps, args.osts, plain_env)
        (out / "create-variants.json").write_text(json.dumps(res, indent=1) + "\n")
        return 0
    result: dict = {"args": vars(args), "lustre": lctl("get_param", "-n", "version").strip(),
                    "mapper": MAPPER, "rows": []}
    with tempfile.TemporaryDirectory() as tmp, \
            RealLustreStack(out / "stack-create-rpcs", mapper_settings=dict(MAPPER),
                            # the guest's OSTs are alike: by default leases would be left to
                            # Lustre's allocator (plain creates); this measures the shim's
                            # create with the mapper's layout
                            policy_params={"mcmf": {"alike_to_lustre": False}}) as stack:
        exe = build_anchor(Path(tmp))
        shim_env = dict(plain_env, LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack.mapper,
                        LUSTRE_ALLOC_TIMEOUT_MS="2000",
                        LUSTRE_ALLOC_RECORD=str(out / "shim-record-create-rpcs.tsv"))
        for r in range(args.rounds):
            order = ROWS[r % len(ROWS):] + ROWS[:r % len(ROWS)]
            for size in (0, args.mib << 20):
                for row in order:
                    res = run_row(exe, row, base / f"{row}-{size}-{r}", args.files, size,
                                  args.osts, plain_env, shim_env)
                    res["round"] = r
                    result["rows"].append(res)
                    print(json.dumps(res), flush=True)
        result["steps"] = run_steps(exe, base / "steps", args.steps, args.osts, plain_env)
        result["variants"] = run_variants(exe, base, args.steps, args.osts, plain_env)
        print(json.dumps({"steps": result["steps"]}), flush=True)
        result["mdtest"] = {}
        for name, env in (("plain", plain_env),
                          ("shim_per_create", dict(shim_env, LUSTRE_ALLOC_LEASE="0")),
                          ("shim_leased", shim_env)):
            result["mdtest"][name] = mdtest(base / f"mdtest-{name}", args.mdtest_files, env)
            print(json.dumps({"mdtest": name, "result": result["mdtest"][name]}), flush=True)
    (out / "create-rpcs.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
