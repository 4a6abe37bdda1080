#!/usr/bin/env bash
# Sets up everything (Debian packages, .venv, the C build) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
# two workers: the tests wait on sockets and child processes as much as they compute
# (1591 tests: 4 min 50 s with two on 2 cores)
exec .venv/bin/python -m pytest -q -n 2 "$@"
