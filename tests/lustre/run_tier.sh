#!/usr/bin/env bash
# The real-Lustre tier, inside the lustre-vm guest (scripts/lustre-vm.sh test): pytest over
# tests/lustre with its report (JUnit XML and the rules Lustre was checked against) in $OUT.
set -uo pipefail
cd /src
: "${OUT:?run inside the guest (scripts/lustre-vm.sh test)}"
rm -f "$OUT/rules.jsonl"
# the configuration this run is, for report.py --matrix
python - "$OUT/config.json" <<'PY'
import json, os, subprocess, sys
version = subprocess.run(["lctl", "get_param", "-n", "version"], capture_output=True,
                         text=True).stdout.splitlines()[0].split()[-1]
osd, mdts = os.environ.get("LUSTRE_VM_OSD", "zfs"), int(os.environ.get("LUSTRE_VM_MDTS", "1"))
cmd = "bash scripts/lustre-vm.sh test" + ("" if version.startswith("2.17") else
                                          f" --ref v{version.replace('.', '_')}")
cmd += (f" --osd {osd}" if osd != "zfs" else "") + (f" --mdts {mdts}" if mdts > 1 else "")
json.dump({"version": version, "osd": osd, "mdts": mdts, "command": cmd}, open(sys.argv[1], "w"))
PY
python -m pytest -p no:cacheprovider -o addopts= -o timeout=900 --rootdir /src \
    tests/lustre -v -rA --junitxml="$OUT/tier.xml" "$@" 2>&1 | tee "$OUT/tier.log"
rc=${PIPESTATUS[0]}
python tests/lustre/report.py "$OUT/tier.xml" "$OUT/rules.jsonl" >"$OUT/report.md" || rc=1
exit "$rc"
