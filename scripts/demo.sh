#!/usr/bin/env bash
# Sets up everything, then runs the live demo: broker, mapper and 8 collectors on 127.0.0.1
# over emulated Lustre servers (32 OSTs), the first 3 hours of the paper-32ost workloads
# (IOR, HACC-IO, TPA) replayed in 90 s by real programs under the LD_PRELOAD shim, a live
# per-OST fill view, and the live balance compared with the simulator's prediction.
# About two minutes; extra arguments go to lustre-alloc-demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/python -m lustre_alloc.livestack.demo "$@"
