#!/usr/bin/env bash
# Sets up everything, then runs the main job: the bundled scenarios replayed under
# Lustre's round-robin and QOS allocators and the paper's random policy, with the
# comparison table printed and CSV/JSON/PNG results written to results/<scenario>/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
for scenario in paper-32ost nersc-edison-real; do
    .venv/bin/lustre-alloc-sim run "$scenario" --out "results/$scenario" "$@"
done
