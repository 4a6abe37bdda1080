#!/usr/bin/env bash
# The real-Lustre tier, inside the lustre-vm guest (scripts/lustre-vm.sh test): pytest over
# tests/lustre with its report (JUnit XML and the rules Lustre was checked against) in $OUT.
set -uo pipefail
cd /src
: "${OUT:?run inside the guest (scripts/lustre-vm.sh test)}"
rm -f "$OUT/rules.jsonl"
python -m pytest -p no:cacheprovider -o addopts= -o timeout=900 --rootdir /src \
    tests/lustre -v -rA --junitxml="$OUT/tier.xml" "$@" 2>&1 | tee "$OUT/tier.log"
rc=${PIPESTATUS[0]}
python tests/lustre/report.py "$OUT/tier.xml" "$OUT/rules.jsonl" >"$OUT/report.md" || rc=1
exit "$rc"
