"""``lustre-alloc-demo``: the whole stack live on one machine, against emulated Lustre servers.

    lustre-alloc-demo                                  # paper-32ost, first 3 h of its trace in ~90 s
    lustre-alloc-demo --hours 2 --duration 60 --workdir /tmp/demo
    lustre-alloc-demo --shadow                         # a shadow pilot: Lustre places, the mapper watches

One command, everything on 127.0.0.1 (:mod:`lustre_alloc.livestack.stack`): the broker, the mapper
(subscribed to the broker, learned-state file, metrics), one real collector per OSS of the
scenario's cluster reading an emulated Lustre server (:mod:`lustre_alloc.livestack.emulator`: files
in the real formats, driven by the simulator's OST model). Then writer processes
(:mod:`lustre_alloc.livestack.writer`) run under the LD_PRELOAD shim and replay the scenario's
workloads (the bundled IOR, HACC-IO and TPA generators), compressed in time (``--hours`` of
trace in ``--duration`` seconds) and in size (each real byte stands for ``--size-scale``
bytes); what they write is charged back to the emulated OSTs from the shim's record. A live
view (rich) shows the fill of every OST and the max/mean ratio of used space (Paul et al. 2017,
Section II-B: "load balance is the ratio of maximum system load to the mean system load"). At
the end a summary compares the live run's balance with the simulator's prediction for the same
window of the same trace, same cluster and policy (and Lustre's QOS allocator for reference),
and points to the shim's record.

With ``--shadow`` the mapper runs as in a shadow pilot (``[scope] shadow = true``,
docs/operations.md "Rollout"): it decides every create and applies none, the emulated MDS
places every file with Lustre's QOS allocator (``lustre_qos``) and writes its layout where the
shim reads it back and reports it, and the summary adds the shadow report
(``lustre-alloc-ctl shadow-report``): the mapper's lists beside Lustre's, file by file. The
mapper's admin socket is ``ipc://<workdir>/control`` while the demo runs.

How the trace is replayed: every write and delete record of the window becomes one operation of
a writer, at ``timestamp / time_scale`` seconds after the start; the files of one application
with one layout request (stripe count, stripe size, expected bytes of the first write) go to
``--ranks`` writers with that application's job id and hints in their environment (the shim
reads them once). Reads are not replayed (they move no space). A file's real size is its
trace bytes divided by ``--size-scale``, rounded; the emulator multiplies back.
"""
from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from lustre_alloc.livestack.stack import (PROJECT_ROOT, EmulatorPump, LiveStack, LiveStackError,
                                  child_env, spawn, terminate_all)
from lustre_alloc.livestack.emulator import EmulatedCluster, RecordFeed
from lustre_alloc.simulator.metrics import max_mean_ratio
from lustre_alloc.simulator.cli import CONFIG_ERRORS
from lustre_alloc.simulator.scenario import Scenario, ScenarioError, load_scenario
from lustre_alloc.common.cli import command_parser, fail

PROG = "lustre-alloc-demo"
GIB = 1 << 30
SHIM = PROJECT_ROOT / "liblustre_alloc" / "liblustre_alloc.so"


@dataclass
class WriterPlan:
    """The operations of one writer process and the shim hints of its environment."""
    job: str
    stripe_count: int
    stripe_size: int
    expected_bytes: int
    rank: int
    ops: list[list] = field(default_factory=list)

    @property
    def name(self) -> str:
        return (f"{self.job}-c{self.stripe_count}-s{self.stripe_size}-e{self.expected_bytes}"
                f"-r{self.rank}")


def build_plans(scenario: Scenario, data_dir: Path, time_scale: float, size_scale: float,
                ranks: int) -> tuple[list[WriterPlan], int]:
    """Turn the scenario's records into writer plans (see the module doc).

    Returns:
        (plans, creates): the plans, and the number of files the trace creates.
    """
    from lustre_alloc.simulator.workload import scenario_records
    plans: dict[tuple, WriterPlan] = {}
    owner: dict[str, WriterPlan] = {}
    emulated: dict[str, int] = defaultdict(int)
    real: dict[str, int] = defaultdict(int)
    creates = 0
    for r in scenario_records(scenario):
        if r.op == "read":
            continue
        rel = r.file_id.replace("..", "_").lstrip("/")
        path = str(data_dir / rel)
        t = round(r.timestamp_s / time_scale, 4)
        if r.op == "write":
            plan = owner.get(r.file_id)
            first = plan is None
            if first:
                rank = zlib.crc32(r.file_id.encode()) % ranks
                key = (r.jobid, r.stripe_count, r.stripe_size, r.bytes, rank)
                plan = plans.get(key)
                if plan is None:
                    plan = plans[key] = WriterPlan(r.jobid, r.stripe_count, r.stripe_size,
                                                   r.bytes, rank)
                owner[r.file_id] = plan
                creates += 1
            emulated[r.file_id] += r.bytes
            size = int(round(emulated[r.file_id] / size_scale))
            n = size - real[r.file_id]
            real[r.file_id] = size
            if n > 0 or first:
                plan.ops.append([t, "write", path, max(n, 0)])
        else:
            plan = owner.pop(r.file_id, None)
            if plan is not None:
                plan.ops.append([t, "delete", path, 0])
                emulated.pop(r.file_id, None)
                real.pop(r.file_id, None)
    return list(plans.values()), creates


def predict(scenario: Scenario, policies: Sequence[str], interval_s: float,
            time_scale: float) -> dict[str, np.ndarray]:
    """The simulator's hourly max/mean used-space ratio for each policy over the same
    window, with the MDS's statfs and the collectors' stats refreshed as often (in trace
    time) as the live run's collectors sample."""
    from lustre_alloc.simulator.runner import prepare, run_policy
    every = interval_s * time_scale
    sc = dataclasses.replace(scenario, cluster=dataclasses.replace(
        scenario.cluster, statfs_interval_s=every, stats_interval_s=every))
    cluster = prepare(sc)
    out = {}
    for p in policies:
        result = run_policy(sc, cluster, p)
        out[p] = result.ost_used_hourly
    return out


# ---------------------------------------------------------------------------------- view
@dataclass
class RunState:
    """What the live view and the summary show."""
    started: float = 0.0
    duration_s: float = 0.0
    time_scale: float = 1.0
    initial_used: np.ndarray | None = None
    records: Counter = field(default_factory=Counter)
    ratio_series: list[tuple[float, float]] = field(default_factory=list)
    writers_done: int = 0
    writers: int = 0
    shadow: dict | None = None
    """The shadow report (``--shadow``)."""


def classify(rec: dict[str, str]) -> str:
    """One word for a record line: who placed the file."""
    if rec.get("result") == "layout":
        fb = rec.get("mapper_fallback", "")
        return f"{rec.get('policy', '?')}" + (f" (fallback {fb})" if fb else "")
    return f"Lustre default ({rec.get('reason', '')})"


def render(state: RunState, emu: EmulatedCluster, metrics: dict[str, float]):
    """The live view: header lines and a per-OST fill table."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text
    used = emu.used_bytes()
    cap = emu.capacity_bytes()
    ratio = float(max_mean_ratio(used))
    elapsed = time.time() - state.started
    trace_h = elapsed * state.time_scale / 3600
    head = Text()
    head.append(f"lustre-alloc live demo   {elapsed:5.1f} s / {state.duration_s:.0f} s   "
                f"trace time {trace_h:4.2f} h   writers {state.writers - state.writers_done}"
                f"/{state.writers} running\n", style="bold")
    head.append(f"max/mean used space: {ratio:.3f}   "
                f"(start {float(max_mean_ratio(state.initial_used)):.3f})\n", style="bold cyan")
    head.append("creates: " + ", ".join(f"{k}: {v}" for k, v in state.records.most_common())
                + "\n")
    head.append("mapper: " + ", ".join(
        f"{k.split('{')[-1].rstrip('}')}={int(v)}" for k, v in sorted(metrics.items())
        if k.startswith("lustre_alloc_mapper_requests_total")) + "\n")
    table = Table(show_edge=False, pad_edge=False, box=None)
    for col, kw in (("OST", {"justify": "right"}), ("OSS", {}), ("used GiB", {"justify": "right"}),
                    ("fill", {"justify": "right"}), ("relative to the fullest OST", {}),
                    ("+GiB", {"justify": "right"})):
        table.add_column(col, **kw)
    top = float(used.max()) or 1.0
    width = 40
    for p, ost in enumerate(emu.osts):
        n = int(round(width * used[p] / top))
        table.add_row(str(ost.index), ost.oss, f"{used[p] / GIB:8.1f}",
                      f"{100 * used[p] / cap[p]:5.2f}%", "█" * n + "·" * (width - n),
                      f"{(used[p] - state.initial_used[p]) / GIB:+8.1f}")
    return Group(head, table)


# ---------------------------------------------------------------------------------- run
class StopRequest:
    """The SIGINT/SIGTERM handler: raises KeyboardInterrupt and remembers that it did.

    Python runs `os.register_at_fork` handlers (logging's lock release among them) after every
    `subprocess.Popen` with a `preexec_fn`, and an exception raised inside one is printed and
    dropped ("Exception ignored in ..."). A Ctrl-C that lands while a child is being spawned
    would be lost and the demo would run to its end; `check()` raises it again at the next tick.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: object) -> None:
        self.signum = signum
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise KeyboardInterrupt if a stop signal has arrived (even one already dropped)."""
        if self.signum is not None:
            raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    p = command_parser(
        prog=PROG,
        description="Run broker, mapper and collectors over emulated Lustre servers on "
                    "127.0.0.1, replay a bundled workload with real programs under the "
                    "LD_PRELOAD shim, show per-OST fill live, and compare with the simulator.")
    p.add_argument("--scenario", default="paper-32ost",
                   help="bundled scenario name or TOML file (paper-32ost)")
    p.add_argument("--hours", type=float, default=3.0,
                   help="hours of the scenario's trace to replay (3; a whole number keeps the "
                        "simulator's hourly samples aligned)")
    p.add_argument("--duration", type=float, default=90.0,
                   help="real seconds to replay them in (90)")
    p.add_argument("--size-scale", type=float, default=65536.0,
                   help="trace bytes per real byte written (65536: 1 GiB -> 16 KiB)")
    p.add_argument("--ranks", type=int, default=2,
                   help="writer processes per application and layout request (2)")
    p.add_argument("--policy", default="mcmf", help="the mapper's primary policy (mcmf)")
    p.add_argument("--interval", type=float, default=1.0, help="collector interval, s (1)")
    p.add_argument("--timeout-ms", type=int, default=200,
                   help="LUSTRE_ALLOC_TIMEOUT_MS of the writers (200)")
    p.add_argument("--round-budget", type=float, default=0.01,
                   help="mapper round_budget_s (0.01: the flow solver may take 10 ms a round)")
    p.add_argument("--workdir", help="where everything goes (default: a new temporary dir)")
    p.add_argument("--no-live", action="store_true", help="progress lines instead of the live view")
    p.add_argument("--shadow", action="store_true",
                   help="shadow pilot: Lustre's allocator places every file, the mapper decides "
                        "and reports what it would have done (the shadow report)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rich.console import Console
    console = Console()
    if args.hours <= 0 or args.duration <= 0 or args.size_scale < 1 or args.ranks < 1:
        return fail(PROG, "--hours and --duration must be > 0, --size-scale >= 1, --ranks >= 1")
    try:
        scenario = load_scenario(args.scenario).with_overrides(duration_s=args.hours * 3600)
    except ScenarioError as exc:
        return fail(PROG, exc)
    if not SHIM.exists():
        subprocess.run(["make", "-s", "-C", str(SHIM.parent)], check=False)
    if not SHIM.exists():
        return fail(PROG, f"{SHIM} missing; run scripts/setup-env.sh")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="lustre-alloc-demo-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop)
    # Python raises KeyboardInterrupt on SIGINT only if SIGINT was not ignored when it started;
    # a background job of a non-interactive shell (how batch systems and CI start us) inherits
    # it ignored, and Ctrl-C or `kill -INT` would then do nothing: take it back explicitly.
    signal.signal(signal.SIGINT, stop)
    # `kill -USR1` prints every thread's stack to stderr: how to see where a stop hangs (the
    # process's own fd 2: sys.stderr may be a stand-in without a file descriptor)
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    try:
        return _run(args, scenario, workdir, console, stop)
    except KeyboardInterrupt:
        console.print("lustre-alloc-demo: interrupted; every process stopped. "
                      f"Files are in {workdir}")
        return 130
    except CONFIG_ERRORS as exc:  # a data file the scenario names is missing or unreadable
        return fail(PROG, exc)


def _run(args: argparse.Namespace, scenario: Scenario, workdir: Path, console,
         stop: StopRequest) -> int:
    from lustre_alloc.simulator.cluster import build_cluster
    time_scale = args.hours * 3600 / args.duration
    data = workdir / "data"
    data.mkdir(exist_ok=True)
    record = workdir / "shim-record.tsv"
    record.unlink(missing_ok=True)
    emu = EmulatedCluster(build_cluster(scenario.cluster, scenario.seed), workdir / "servers")
    plans, creates = build_plans(scenario, data, time_scale, args.size_scale, args.ranks)
    for plan in plans:
        for op in plan.ops:
            Path(op[2]).parent.mkdir(parents=True, exist_ok=True)
    state = RunState(duration_s=args.duration, time_scale=time_scale,
                     initial_used=emu.used_bytes(), writers=len(plans))
    console.print(f"[bold]lustre-alloc demo[/bold]: scenario {scenario.name}, "
                  f"{len(emu.osts)} OSTs on {len(emu.oss_names)} OSSes, first {args.hours:g} h "
                  f"of its trace ({creates} files, {sum(len(p.ops) for p in plans)} writes and "
                  f"deletes) in {args.duration:g} s by {len(plans)} writers under the shim; "
                  f"work dir {workdir}")
    control = f"ipc://{workdir}/control"
    stack = LiveStack(workdir, emu, interval_s=args.interval, policy=args.policy,
                      mapper_settings={"round_budget_s": args.round_budget,
                                       "control_endpoint": control},
                      log_level="info", scope={"shadow": True} if args.shadow else None)
    feed = RecordFeed(emu, record, bytes_scale=args.size_scale)

    def on_lines(lines: list[dict[str, str]]) -> None:
        state.records.update(classify(r) for r in lines)
    # in shadow mode the emulated MDS places every file: placing it sooner lets the shim
    # report it before its queue of reports fills (on Lustre the layout is there at create)
    pump = EmulatorPump(emu, feed, min(args.interval / 2, SHADOW_PUMP_S) if args.shadow
                        else args.interval / 2, on_lines)
    writers: list[subprocess.Popen] = []
    try:
        console.print("starting broker, mapper and "
                      f"{len(emu.oss_names)} collectors on 127.0.0.1 ...")
        pump.start()
        stack.start(ready_timeout_s=60)
        console.print(f"mapper {stack.endpoints.mapper} knows all {len(emu.osts)} OSTs; "
                      "starting the writers")
        start = time.time() + 1.0
        state.started = start
        env_base = child_env({"LD_PRELOAD": str(SHIM), "LUSTRE_ALLOC_MAPPER": stack.endpoints.mapper,
                              "LUSTRE_ALLOC_PATHS": str(data), "LUSTRE_ALLOC_RECORD": str(record),
                              "LUSTRE_ALLOC_TIMEOUT_MS": str(args.timeout_ms)})
        plan_dir = workdir / "plans"
        plan_dir.mkdir(exist_ok=True)
        for plan in plans:
            path = plan_dir / f"{plan.name}.jsonl"
            path.write_text("".join(json.dumps(op) + "\n" for op in plan.ops))
            env = {**env_base, "LUSTRE_ALLOC_JOBID": plan.job,
                   "LUSTRE_ALLOC_STRIPE_COUNT": str(plan.stripe_count),
                   "LUSTRE_ALLOC_STRIPE_SIZE": str(plan.stripe_size),
                   "LUSTRE_ALLOC_EXPECTED_BYTES": str(plan.expected_bytes)}
            out = open(plan_dir / f"{plan.name}.out", "wb")
            writers.append(spawn([sys.executable, "-m", "lustre_alloc.livestack.writer", str(path),
                                  f"{start:.6f}"], stack.log_path(f"writer-{plan.name}"),
                                 env=env, cwd=workdir, stdout=out))
            out.close()
        stop.check()
        _watch(args, state, emu, stack, pump, writers, console, stop)
        pump.step()
        if args.shadow:
            state.shadow = _shadow_report(control, pump, console)
    finally:
        terminate_all(writers, 2.0)
        pump.stop()
        stack.stop()
    if pump.error is not None:
        raise pump.error
    return _summary(args, scenario, state, emu, feed, plans, writers, workdir, record,
                    time_scale, console)


def _watch(args, state: RunState, emu: EmulatedCluster, stack: LiveStack, pump: EmulatorPump,
           writers: list[subprocess.Popen], console, stop: StopRequest) -> None:
    """Refresh the view until every writer is done (or the time budget is spent)."""
    from rich.live import Live
    deadline = state.started + args.duration * 1.5 + 30
    live_view = console.is_terminal and not args.no_live
    last_line = 0.0
    metrics: dict[str, float] = {}
    next_metrics = 0.0

    def tick() -> bool:
        nonlocal metrics, next_metrics
        stop.check()
        state.writers_done = sum(w.poll() is not None for w in writers)
        now = time.time()
        with pump.lock:
            state.ratio_series.append((now - state.started, float(max_mean_ratio(emu.used_bytes()))))
        if now >= next_metrics:
            metrics = stack.metrics(0.5)
            next_metrics = now + 1.0
        for name in ("mapper", "broker"):
            if stack.procs[name].poll() is not None:
                raise LiveStackError(f"{name} died; see {stack.log_path(name)}")
        return state.writers_done == len(writers) or now > deadline

    if live_view:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            while True:
                done = tick()
                with pump.lock:
                    live.update(render(state, emu, metrics))
                if done:
                    break
                time.sleep(0.25)
        return
    while True:
        done = tick()
        if time.time() - last_line >= 10 or done:
            last_line = time.time()
            t, ratio = state.ratio_series[-1]
            console.print(f"  t={t:5.1f} s  trace {t * state.time_scale / 3600:4.2f} h  "
                          f"max/mean used {ratio:.3f}  creates "
                          + ", ".join(f"{k}: {v}" for k, v in state.records.most_common()))
        if done:
            with pump.lock:
                console.print(render(state, emu, metrics))
            return
        time.sleep(0.25)


SHADOW_PUMP_S = 0.1
"""In shadow mode, how often the emulated MDS places new files at most, s."""
SHADOW_SETTLE_S = 2.0
"""After the last writer, how long the demo lets the shim's last reports arrive, s: the
emulated MDS places a file up to a pump period after its create."""


def _shadow_report(control: str, pump: EmulatorPump, console) -> dict | None:
    """The mapper's shadow report of the run, printed (None when the mapper does not answer)."""
    from lustre_alloc.mapper.service.ctl import CtlError, ask
    from lustre_alloc.mapper.shadow.report import format_report
    deadline = time.monotonic() + SHADOW_SETTLE_S
    while time.monotonic() < deadline:
        pump.step()
        time.sleep(0.2)
    try:
        reply = ask(control, {"op": "shadow_report", "window_s": 86400.0}, 10.0)
    except CtlError as exc:
        console.print(f"no shadow report: {exc}")
        return None
    report = reply.get("report")
    if not reply.get("ok") or report is None:
        console.print(f"no shadow report: {reply.get('error')}")
        return None
    console.print(format_report("", report), markup=False, highlight=False)
    return report


def _summary(args, scenario: Scenario, state: RunState, emu: EmulatedCluster, feed: RecordFeed,
             plans: list[WriterPlan], writers: list[subprocess.Popen], workdir: Path,
             record: Path, time_scale: float, console) -> int:
    from rich.table import Table
    results = []
    for plan in plans:
        out = workdir / "plans" / f"{plan.name}.out"
        try:
            results.append(json.loads(out.read_text().strip().splitlines()[-1]))
        except (IndexError, ValueError, OSError):
            results.append({"failed_ops": -1})
    failed = sum(1 for w in writers if w.returncode not in (0,))
    failed_creates = sum(int(r.get("failed_creates", 0)) for r in results)
    late = max((float(r.get("max_late_s", 0)) for r in results), default=0.0)
    policies = [args.policy] + [p for p in ("lustre_qos",) if p != args.policy]
    console.print("running the simulator on the same window ...")
    predicted = predict(scenario, policies, args.interval, time_scale)
    hours = int(args.hours)
    table = Table(title="max/mean used space per OST (Paul et al. 2017, Section II-B)")
    table.add_column("trace hour", justify="right")
    live_policy = f"lustre_qos; {args.policy} in shadow" if args.shadow else args.policy
    table.add_column(f"live ({live_policy})", justify="right")
    for p in policies:
        table.add_column(f"simulator ({p})", justify="right")
    series = state.ratio_series
    summary_rows = []
    for h in range(0, hours + 1):
        t_real = h * 3600 / time_scale
        live = (float(max_mean_ratio(state.initial_used)) if h == 0 else
                min(series, key=lambda s: abs(s[0] - t_real))[1] if series else float("nan"))
        if h == hours:
            live = float(max_mean_ratio(emu.used_bytes()))
        sims = [float(max_mean_ratio(predicted[p][h])) for p in policies]
        summary_rows.append({"hour": h, "live": live, **{f"sim_{p}": s for p, s in zip(policies, sims)}})
        table.add_row(str(h), f"{live:.3f}", *(f"{s:.3f}" for s in sims))
    console.print(table)
    if args.shadow:
        console.print(f"What this compares: in shadow mode Lustre's allocator (the emulated "
                      f"MDS's QOS) placed every file, so the live column is Lustre's fill "
                      f"balance (max/mean used space; 1.0 is even), beside what the simulator "
                      f"predicts for the same trace under {' and '.join(policies)}. What "
                      f"{args.policy} would have done is the shadow report above: per file, "
                      f"its list beside Lustre's and both priced by its cost model on the same "
                      f"state; nothing it decided was applied, and each choice was booked only "
                      f"until Lustre's layout was reported.")
    else:
        console.print(f"What this compares: the OST fill balance (max/mean used space; 1.0 "
                      f"is even) the live stack reached with {args.policy} placing every file, "
                      f"beside what the simulator predicts for the same trace under "
                      f"{' and '.join(policies)}. The live column tests that the running "
                      f"system does what the simulator says; which policy wins is the "
                      f"simulator's tables' question (docs/placement.md), not this one's. Fill "
                      f"is not the default mcmf's aim: where the OSTs are alike it places as "
                      f"Lustre's round-robin, and evening out space is the rebalancer's job "
                      f"(docs/rebalance.md).")
    lines = feed.lines
    by = Counter(classify(r) for r in lines)
    console.print("creates placed by: " + ", ".join(f"{k}: {v}" for k, v in by.most_common()))
    console.print(f"writers: {len(writers)}, failed: {failed}, failed creates: {failed_creates}, "
                  f"largest lag behind the plan: {late:.2f} s")
    console.print(f"shim record ({len(lines)} lines): {record}")
    console.print(f"logs: {workdir / 'logs'}   mapper state: {workdir / 'mapper-state.json'}")
    summary = {"scenario": scenario.name, "hours": args.hours, "duration_s": args.duration,
               "time_scale": time_scale, "size_scale": args.size_scale, "policy": args.policy,
               "osts": len(emu.osts), "osses": len(emu.oss_names), "creates_recorded": len(lines),
               "placed_by": dict(by), "writers": len(writers), "writers_failed": failed,
               "failed_creates": failed_creates, "max_late_s": late, "balance": summary_rows,
               "shadow": args.shadow, "shadow_report": state.shadow,
               "final_used_bytes": emu.used_bytes().tolist(), "record": str(record)}
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1))
    console.print(f"summary: {workdir / 'summary.json'}")
    return 0 if failed == 0 and failed_creates == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
