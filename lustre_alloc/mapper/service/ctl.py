"""``lustre-alloc-ctl``: ask a running mapper through its admin socket
(:mod:`lustre_alloc.mapper.service.admin_socket`).

    lustre-alloc-ctl status                      per file system: OSTs usable / excluded and why,
                                                 stragglers, plan queues, fallback share, shadow
                                                 agreement, steering
    lustre-alloc-ctl explain --path /lustre/f    the last decision for a path (or --jobid),
                                                 priced with the cheapest alternatives
    lustre-alloc-ctl shadow-report --window 3600 the mapper's choices beside Lustre's
    lustre-alloc-ctl reload                      reload the configuration (as SIGHUP) and say
                                                 whether it was applied
    lustre-alloc-ctl forget-speed --ost OST000e  drop the speed learned of an OST (a replaced
                                                 slow drive): it rejoins at once, re-measured

``--json`` prints the reply as JSON. Exit status (:mod:`lustre_alloc.common.cli`): 0 answered, 1 the
mapper refused, a reload was rejected or changed keys only a restart applies, or nothing
answered (one line on stderr), 2 a usage error.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Sequence

import msgpack
import zmq

from lustre_alloc.common.cli import EXIT_FAILED, OneLineParser, command_parser, fail
from lustre_alloc.common.runtime_dir import control_candidates

PROG = "lustre-alloc-ctl"


def default_socket() -> str:
    """The first admin socket that exists of the packaged unit's and a hand-started
    mapper's (:func:`lustre_alloc.common.runtime_dir.control_candidates`); the unit's when neither does."""
    for path in control_candidates():
        if path.exists():
            return f"ipc://{path}"
    return f"ipc://{control_candidates()[0]}"


_OST_RE = re.compile(r"^(?:[A-Za-z0-9_]{1,8}-)?OST([0-9a-fA-F]{4,8})$")


def parse_ost(text: str) -> int:
    """An OST index from ``14``, ``OST000e`` or ``scratch-OST000e`` (Lustre prints the
    index in hexadecimal: lustre/include/obd.h target names).

    Raises:
        argparse.ArgumentTypeError: none of those forms.
    """
    m = _OST_RE.match(text)
    if m:
        return int(m.group(1), 16)
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"not an OST index or name: {text!r} "
                                     "(14, OST000e or scratch-OST000e)")


class CtlError(Exception):
    """No answer from the admin socket (one line)."""


def ask(endpoint: str, request: dict[str, Any], timeout_s: float = 15.0) -> dict[str, Any]:
    """Send one request to the admin socket and return the reply map.

    Raises:
        CtlError: nothing answered within ``timeout_s`` (the mapper is not running, or the
            socket is another's).
    """
    if endpoint.startswith("ipc://") and not os.path.exists(endpoint[len("ipc://"):]):
        looked = ", ".join(map(str, control_candidates()))
        raise CtlError(f"no admin socket at {endpoint} (a mapper's is at one of: {looked}; "
                       f"is it running, with control_endpoint on?)")
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    try:
        sock.connect(endpoint)
        sock.send(msgpack.packb(request, use_bin_type=True))
        if not sock.poll(int(timeout_s * 1000)):
            raise CtlError(f"no answer from {endpoint} within {timeout_s:g} s (is the mapper "
                           f"running, with control_endpoint there?)")
        reply = msgpack.unpackb(sock.recv(), raw=False)
    finally:
        sock.close(0)
    if not isinstance(reply, dict):
        raise CtlError(f"{endpoint} answered something that is not a map")
    return reply


def _fmt(x: Any, spec: str = ".1%") -> str:
    return "-" if x is None else format(x, spec)


def format_status(reply: dict[str, Any]) -> str:
    """A status reply as text for a person."""
    lines = [f"mapper pid {reply['pid']} serving {reply['endpoint']}; "
             f"fallback share {_fmt(reply.get('fallback_share'))}; "
             f"check violations {reply['check_violations']}; reloads "
             f"{reply['reloads']['applied']} applied, {reply['reloads']['rejected']} rejected"]
    if "scope" in reply:
        lines.append(f"  scope in force: {reply['scope']}")
    req = reply["requests"]
    lines.append("  replies: " + ", ".join(f"{k} {v}" for k, v in req.items() if v))
    held = reply["leases"]
    lines.append(f"  leases (protocol v2): {held['held']} held, {held['layouts']} layouts, "
                 f"by {held['clients']} clients")
    for fs in reply["filesystems"]:
        lines.append(f"file system {fs['fsname'] or '(no sample yet)'}: mode {fs['mode']}, "
                     f"policy {fs['policy']} (fallback {fs['fallback']})")
        lines.append(f"  OSTs {fs['usable']} usable of {fs['osts']}; newest sample "
                     f"{_fmt(fs['newest_sample_age_s'], '.1f')} s old; stale servers "
                     f"{', '.join(fs['stale_servers']) or 'none'}")
        excluded = ", ".join(f"OST{e['ost']:04x} ({e['reason']})" for e in fs["excluded"])
        lines.append(f"  excluded: {excluded or 'none'}")
        lines.append(f"  degraded: {', '.join(f'OST{i:04x}' for i in fs['degraded']) or 'none'}"
                     f"; stragglers: {', '.join(f'OST{i:04x}' for i in fs['stragglers']) or 'none'}")
        moved = ", ".join(f"OST{m['ost']:04x} (on {m['oss']})" for m in fs.get("failed_over", []))
        lines.append(f"  failed over: {moved or 'none'}")
        slow = ", ".join(f"OST{e['ost']:04x} ({e['ratio']:.2f}x the median)"
                         for e in fs.get("slow_estimates", []))
        lines.append(f"  believed slow (speed estimate): {slow or 'none'}")
        depths = ", ".join(f"{k}: {v}" for k, v in fs["plan_queue_depths"].items())
        lines.append(f"  plan queues (pool/count/size band/bytes band): {depths or 'empty'}")
        fb = ", ".join(f"{k} {v}" for k, v in fs["fallbacks"].items())
        lines.append(f"  fallback rounds: {fb or 'none'}")
        sh = fs["shadow"]
        if sh["decisions"]:
            lines.append(f"  shadow (last hour): {sh['decisions']} decisions, {sh['reported']} "
                         f"reported, same OSTs {_fmt(sh['same_osts'])}, mapper expected sooner "
                         f"{_fmt(sh['mapper_expected_sooner'])}, the same "
                         f"{_fmt(sh.get('expected_same'))}, later "
                         f"{_fmt(sh.get('mapper_expected_later'))}")
    steering = reply.get("steering")
    if steering:
        for fs, actions in steering.items():
            what = ", ".join(f"{a.get('kind')} OST{a.get('ost', 0):04x}" for a in actions)
            lines.append(f"steering {fs}: {what or 'no action in force'}")
    mig = reply.get("migration")
    if mig:
        evac = ", ".join(f"OST{i:04x}" for i in mig.get("evacuating", [])) or "none"
        lines.append(f"migration {mig.get('fsname')} ({mig.get('mode')}, reported "
                     f"{_fmt(mig.get('age_s'), '.0f')} s ago): evacuating {evac}; "
                     f"{mig.get('running', 0)} running, {mig.get('queued', 0)} queued "
                     f"({mig.get('queued_bytes', 0) / (1 << 30):.1f} GiB), {mig.get('done', 0)} "
                     f"done, {mig.get('failed', 0)} failed, {mig.get('given_up', 0)} given up; "
                     f"paused: {mig.get('paused') or 'no'}"
                     + (f"; last error: {mig['last_error']}" if mig.get("last_error") else ""))
        lines += ost_lines(mig.get("osts") or [])
    return "\n".join(lines)


def gib_text(b: float) -> str:
    return f"{b / (1 << 30):.1f} GiB"


def duration_text(s: float | None) -> str:
    if s is None:
        return "unknown"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def ost_lines(osts: list[dict[str, Any]]) -> list[str]:
    """One line per evacuated OST of a status (also in ``lustre-alloc-ctl status``)."""
    lines = []
    for o in osts:
        head = f"  OST{int(o['ost']):04x} ({', '.join(o['why'])}): "
        if o["drained"]:
            body = "drained" + (f", {o['unmovable_files']} files left that it may not move"
                                if o.get("unmovable_files") else "")
        else:
            body = (f"{gib_text(o['left_bytes'])} in {o['left_files']} files left, "
                    f"{o['rate_bytes_s'] / (1 << 20):.1f} MiB/s, ETA "
                    f"{duration_text(o.get('eta_s'))}")
        if o.get("still_receives"):
            body += "; the mapper still places new objects on it"
        lines.append(head + body)
    return lines


def format_explain(d: dict[str, Any]) -> str:
    """An explain reply's decision as text for a person."""
    p = d["priced"]
    head = (f"{d['path'] or '(no path)'} jobid {d['jobid']} on {d['fsname']}: {d['mode']}")
    if d["mode"] == "refused":
        return f"{head}, refused errno {d['errno']}: {d['reason']}"
    osts = ", ".join(f"OST{i:04x}" for i in d["osts"])
    lines = [f"{head} by {d['policy']}{' (fallback ' + d['fallback'] + ')' if d['fallback'] else ''}"
             f"{' [' + d['note'] + ']' if d['note'] else ''}",
             f"  request: stripe count {d['stripe_count']}, stripe size {d['stripe_size']} B, "
             f"pool {d['pool'] or '(none)'}, expected {d['expected_bytes']} B",
             f"  chosen: {osts} on state version {d['state_version']}",
             f"  priced on state version {p['state_version']}: expected "
             f"{_fmt(p['chosen_expected_s'], '.4f')} s (slowest stripe), per stripe "
             + ", ".join(_fmt(s, ".4f") for s in p["chosen_stripe_s"] or []),
             "  cheapest OSTs now: " + ", ".join(f"OST{c['ost']:04x} {c['expected_s']:.4f} s"
                                                 for c in p["cheapest"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = command_parser(PROG, "Ask a running mapper: status, explain, shadow-report, reload, "
                              "forget-speed.")
    ap.add_argument("--socket", default=None,
                    help="the mapper's control_endpoint (default: the packaged unit's, "
                         "/run/lustre-alloc/control, or a hand-started mapper's)")
    ap.add_argument("--json", action="store_true", help="print the reply as JSON")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for an answer")
    sub = ap.add_subparsers(dest="op", required=True, parser_class=OneLineParser)
    sub.add_parser("status", help="per file system: OSTs, stragglers, queues, fallbacks, shadow")
    ex = sub.add_parser("explain", help="the last decision for a path or a jobid")
    which = ex.add_mutually_exclusive_group(required=True)
    which.add_argument("--path")
    which.add_argument("--jobid")
    ex.add_argument("--fsname")
    sh = sub.add_parser("shadow-report", help="the mapper's choices beside Lustre's")
    sh.add_argument("--window", type=float, default=3600.0, help="seconds back (default 3600)")
    sh.add_argument("--fsname")
    sub.add_parser("reload", help="reload the configuration (as SIGHUP)")
    fg = sub.add_parser("forget-speed", help="drop the speed learned of OSTs (a replaced drive)")
    fg.add_argument("--ost", type=parse_ost, action="append", required=True,
                    help="14, OST000e or scratch-OST000e; repeatable")
    fg.add_argument("--fsname")
    args = ap.parse_args(argv)
    request: dict[str, Any] = {"op": args.op.replace("-", "_")}
    if args.op == "explain":
        request.update({k: v for k, v in (("path", args.path), ("jobid", args.jobid),
                                          ("fsname", args.fsname)) if v})
    elif args.op == "shadow-report":
        request["window_s"] = args.window
        if args.fsname:
            request["fsname"] = args.fsname
    elif args.op == "forget-speed":
        request["osts"] = args.ost
        if args.fsname:
            request["fsname"] = args.fsname
    try:
        reply = ask(args.socket or default_socket(), request, args.timeout)
    except CtlError as exc:
        return fail(PROG, exc, EXIT_FAILED)
    if not reply.get("ok"):
        return fail(PROG, reply.get("error", "refused"), EXIT_FAILED)
    if args.json:
        print(json.dumps(reply, indent=2, sort_keys=True))
    elif args.op == "status":
        print(format_status(reply))
    elif args.op == "explain":
        print(format_explain(reply["decision"]))
    elif args.op == "shadow-report":
        from lustre_alloc.mapper.shadow.report import format_report
        print(format_report(args.fsname or "", reply["report"]))
    elif args.op == "forget-speed":
        for fs, osts in reply["forgotten"].items():
            print(f"{fs}: forgot the speed of "
                  f"{', '.join(f'OST{i:04x}' for i in osts) or 'nothing (none was measured)'}")
    else:
        restart = reply.get("needs_restart") or []
        print(f"reload {reply['result']}" + (f": {reply['error']}" if reply.get("error") else
                                             f" (changed: {', '.join(reply.get('changed') or []) or 'nothing'})"))
        if restart:
            print(f"needs a restart (the running values are kept): {', '.join(restart)}")
            return 1
    return 0 if reply.get("result", "applied") == "applied" else 1


if __name__ == "__main__":
    sys.exit(main())
