#!/usr/bin/env bash
# Sets up everything (Debian packages, .venv, the C build) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/python -m pytest -q "$@"
