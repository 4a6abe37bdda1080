#!/usr/bin/env bash
# Sets up everything, then runs the main job: the bundled scenarios replayed under
# Lustre's round-robin and QOS allocators, the paper's random policy and MCMF, with the
# comparison tables printed and CSV/JSON/PNG results written to results/<scenario>/:
# today's two worlds, then one where placement matters (straggler-ost: a real job bound
# by a straggler OST) beside the perfect-information reference (oracle) and the share of
# its headroom over round-robin each policy captures; last, paper-32ost with the periodic
# lfs migrate rebalancer (lustre_alloc/rebalance): the paper's OST balance (Fig. 11), which no
# placement policy reaches alone without trading bandwidth for space.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
mkdir -p results
# straggler-ost is the longest world (its oracle run alone takes about two minutes): it
# starts first and runs beside the others; its table is printed in its turn.
.venv/bin/lustre-alloc-sim run straggler-ost --out results/straggler-ost "$@" \
    > results/straggler-ost.log 2>&1 &
long=$!
for scenario in paper-32ost nersc-edison-real; do
    .venv/bin/lustre-alloc-sim run "$scenario" --out "results/$scenario" "$@"
done
status=0
wait "$long" || status=$?
cat results/straggler-ost.log
[ "$status" -eq 0 ] || exit "$status"
.venv/bin/lustre-alloc-sim run paper-32ost-rebalance --out results/paper-32ost-rebalance "$@"
