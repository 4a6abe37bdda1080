"""``lustre-alloc-rebalance plan``: write a reviewable ``lfs migrate`` script or JSON
(``lustre-alloc-rebalance run``, the migration service, is added by :mod:`lustre_alloc.rebalance.cli`).

Example::

    lfs find /lustre -type f -size +1G -printf '%s %p\\n' > files.txt
    lfs find /lustre -type f -size +1G | xargs lfs getstripe > layouts.txt
    lfs df /lustre > df.txt
    lustre-alloc-rebalance plan --state df.txt --ost-rate-mib-s 2000 \\
        --files files.txt --layouts layouts.txt --budget 0.2 -o plan.sh

Bad input (an unknown OST, a file with no layout, a malformed line, a budget of 0) is
one line on stderr naming the file and what is wrong, exit code 2.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any, Callable, Mapping, Sequence, TextIO

from lustre_alloc.common.cli import EXIT_USAGE, OneLineParser, command_parser, fail
from lustre_alloc.rebalance.plan_inputs import PRINTF_FORMAT, build_file_table, read_state
from lustre_alloc.rebalance.plan import (FileTable, MigrationOsts, Plan, PlanInputError, PlanTargets,
                                      plan_migration)

PROG = "lustre-alloc-rebalance"
MIB = 1 << 20


def build_parser(add_commands: Sequence[Callable[[Any], None]] = ()) -> argparse.ArgumentParser:
    """The command's parser; ``add_commands`` each add subcommands to its subparsers."""
    p = command_parser(PROG, "Plan lfs migrate moves that rebalance OST fill and load "
                             "(Pufferscale-style heuristic).")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=OneLineParser)
    pl = sub.add_parser("plan", help="write a migration plan")
    pl.add_argument("--state", required=True,
                    help="lfs df output, or a cluster-state JSON (write_state_json)")
    pl.add_argument("--files", required=True,
                    # argparse %-formats help strings: the printf format's % must be doubled
                    help=f"lfs find ... -printf '{PRINTF_FORMAT.replace('%', '%%')}' output "
                         "(size bytes, path)")
    pl.add_argument("--layouts", required=True, help="lfs getstripe output for those files")
    pl.add_argument("--access", help="optional '<bytes/s> <path>' lines (recent access rate)")
    pl.add_argument("--budget", required=True, type=float,
                    help="fraction (0,1] of each OST's bandwidth the migration may use")
    pl.add_argument("--ost-rate-mib-s", type=float,
                    help="OST bandwidth, MiB/s, for every OST the state gives none")
    pl.add_argument("--fsname", help="file system to use when lfs df shows several")
    pl.add_argument("--fill-tolerance", type=float, default=0.02,
                    help="leave an OST alone within (1+x) times the mean fill (default 0.02)")
    pl.add_argument("--load-tolerance", type=float, default=0.10,
                    help="the same for load (default 0.10)")
    pl.add_argument("--max-duration-s", type=float, help="cut the plan at this estimated time")
    pl.add_argument("--min-size", type=float, default=0.0, help="never move smaller files, bytes")
    pl.add_argument("--move-largest", action="store_true",
                    help="shed an OST's largest files first (fewer files moved) instead of "
                         "Pufferscale's order (keep the largest, finer balance)")
    pl.add_argument("--json", action="store_true", help="write JSON instead of a shell script")
    pl.add_argument("-o", "--output", help="output file (default: stdout)")
    for add in add_commands:
        add(sub)
    return p


def _hms(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def write_script(plan: Plan, files: FileTable, targets: PlanTargets, out: TextIO) -> None:
    """The plan as ``lfs migrate -c K [-S size] -o <ost,...> <file>`` lines, in order."""
    s = plan.summary
    out.write("#!/bin/sh\n"
              f"# {PROG} plan: {s.files_moved} files, {s.bytes_written / (1 << 30):.1f} GiB "
              f"read and written, est. {_hms(s.duration_s)} at {targets.budget_fraction:g} "
              "of each OST's bandwidth\n"
              f"# OST fill max/mean {s.fill_max_mean_before:.3f} -> {s.fill_max_mean_after:.3f} "
              f"(target fill {s.target_fill:.3f}); load max/mean "
              f"{s.load_max_mean_before:.3f} -> {s.load_max_mean_after:.3f}\n"
              f"# not placed (no room within the target): {s.files_unplaced}; "
              f"cut by --max-duration-s: {s.cut_by_duration}\n"
              "# Lines are in plan order (est. start per line); each is independent: a failed\n"
              "# migration leaves its file as it was.\n")
    for i, f in enumerate(plan.files):
        osts = plan.osts_of(i)
        opts = f"-c {len(osts)} "
        if files.stripe_size[f] > 0:
            opts += f"-S {int(files.stripe_size[f])} "
        out.write(f"lfs migrate {opts}-o {','.join(str(int(o)) for o in osts)} "
                  f"{shlex.quote(files.ids[f])}  # start {_hms(plan.est_start_s[i])} "
                  f"end {_hms(plan.est_end_s[i])}\n")


def plan_json(plan: Plan, files: FileTable, table: MigrationOsts, targets: PlanTargets) -> dict:
    """The plan as a JSON-ready dict: ``summary``, ``targets``, ordered ``moves``."""
    moves = []
    for i, f in enumerate(plan.files):
        old = files.ost_index[files.ost_ptr[f]:files.ost_ptr[f + 1]]
        moves.append({"file": files.ids[f], "size_bytes": int(files.size_bytes[f]),
                      "from_osts": [int(o) for o in old],
                      "to_osts": [int(o) for o in plan.osts_of(i)],
                      "est_start_s": round(float(plan.est_start_s[i]), 3),
                      "est_end_s": round(float(plan.est_end_s[i]), 3)})
    return {"summary": vars(plan.summary), "targets": vars(targets),
            "ost_used_after_kbytes": {int(ix): int(u) for ix, u in
                                      zip(table.index, plan.ost_used_after_kbytes)},
            "moves": moves}


def _cmd_plan(args: argparse.Namespace) -> int:
    rate = args.ost_rate_mib_s * MIB if args.ost_rate_mib_s is not None else None
    targets = PlanTargets(budget_fraction=args.budget, fill_tolerance=args.fill_tolerance,
                          load_tolerance=args.load_tolerance,
                          max_duration_s=args.max_duration_s, min_file_bytes=args.min_size,
                          move_largest=args.move_largest)
    table = read_state(args.state, rate, args.fsname)
    files = build_file_table(args.files, args.layouts, args.access)
    plan = plan_migration(table, files, targets)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        if args.json:
            json.dump(plan_json(plan, files, table, targets), out, indent=1)
            out.write("\n")
        else:
            write_script(plan, files, targets, out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def main(argv: list[str] | None = None,
         more: Mapping[str, tuple[Callable[[Any], None], Callable[..., int]]] | None = None) -> int:
    """Run the command; ``more``: subcommand name -> (add its parser, run it with the parsed
    args and the program name)."""
    more = more or {}
    args = build_parser([add for add, _ in more.values()]).parse_args(argv)
    if args.cmd in more:
        return more[args.cmd][1](args, PROG)
    try:
        return _cmd_plan(args)
    except PlanInputError as e:
        return fail(PROG, e, EXIT_USAGE)


if __name__ == "__main__":
    sys.exit(main())
