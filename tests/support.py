"""What many tests share: waiting for an event instead of sleeping a fixed time."""
from __future__ import annotations

import time
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
