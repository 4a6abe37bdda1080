"""What every ``lustre-alloc-*`` command shares: ``--version``, one-line errors, exit codes.

Exit codes, the same for every entry point:

* ``0``: success.
* ``1``: the command ran and failed: an input file it read is malformed (a trace, a Darshan log,
  an ``lfs df`` dump), a service could not bind, a run found failures.
* ``2``: usage or configuration error, found before any work: a bad flag or value, an invalid
  config or scenario file (including a data file the scenario names that is missing), an input
  file named on the command line that does not exist.

Either way the error is one line on stderr, ``<prog>: error: <reason>``, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from lustre_alloc.common.version import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""Values of every ``--log-level`` flag and ``log_level`` setting (Python logging levels)."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (no usage dump) and exit 2.
    Sub-commands made with ``add_subparsers`` get the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def command_parser(prog: str, description: str) -> OneLineParser:
    """The top-level parser of an entry point: one-line usage errors and ``--version``."""
    p = OneLineParser(prog=prog, description=description)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def fail(prog: str, message: object, code: int = EXIT_USAGE) -> int:
    """Print ``<prog>: error: <message>`` as one line on stderr; return ``code`` for ``main``."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code
