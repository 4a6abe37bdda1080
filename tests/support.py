"""What many tests share: waiting for an event instead of sleeping a fixed time."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout_s: float = 5.0, what: str = "condition",
             poll_s: float = 0.05) -> T:
    """Call ``cond`` every ``poll_s`` s until it returns something true, and return that.

    Raises:
        AssertionError: naming ``what``, when ``timeout_s`` s pass first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(poll_s)


def join(publish: Callable[[], object], receive: Callable[[float], object | None],
         timeout_s: float = 10.0, what: str = "the subscription") -> object:
    """Publish probes until one is received, then drain the probes still in flight; return
    the last probe received.

    A ZeroMQ PUB socket drops what it sends before a subscription reaches it (the "slow
    joiner"), so a test that needs its next message delivered waits for this event instead of
    sleeping. ``receive(timeout_s)`` returns a message or None.

    Raises:
        AssertionError: naming ``what``, when no probe arrives within ``timeout_s`` s.
    """
    def probe() -> object | None:
        publish()
        return receive(0.1)
    last = wait_for(probe, timeout_s, what, poll_s=0.0)
    while (more := receive(0.3)) is not None:
        last = more
    return last


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A directory ``build(dir)`` filled once per test run, however many xdist workers ask
    (a module or session fixture is built once per worker): the first worker builds under an
    exclusive lock, the others wait for it and share the result.

    Raises:
        whatever ``build`` raises (in every worker that asked, since nothing was marked done).
    """
    import fcntl
    import os
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                    # the run's directory, shared by its workers
    out, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            out.mkdir(exist_ok=True)
            build(out)
            done.touch()
    return out
