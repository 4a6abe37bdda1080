#!/usr/bin/env bash
# Build the RPMs (collector, mapper, client) with rpmbuild from a copy of this checkout.
# On a host that is not rpm-based (no rpm database: Debian, the CI here) the BuildRequires
# cannot be checked and are skipped (--nodeps).
#
# Usage: packaging/build-rpm.sh OUTDIR [--wheelhouse DIR] [--fast]
#   --fast  gzip -1 payloads instead of rpm's default (the tests: same contents, sooner)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: packaging/build-rpm.sh OUTDIR [--wheelhouse DIR]}
shift
DEFS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --wheelhouse) DEFS+=(--define "wheelhouse $(cd "$2" && pwd)"); shift 2 ;;
        --fast) DEFS+=(--define "_binary_payload w1.gzdio"); shift ;;
        *) echo "build-rpm.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TOP=$(mktemp -d)
trap 'rm -rf "$TOP"' EXIT
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$SRC/lustre_alloc/common/version.py")
mkdir -p "$TOP"/{SOURCES,BUILD,RPMS,SRPMS,SPECS}
"$SRC/packaging/copy-checkout.sh" "$TOP/stage/lustre-alloc-$VERSION"
tar -C "$TOP/stage" -czf "$TOP/SOURCES/lustre-alloc-$VERSION.tar.gz" "lustre-alloc-$VERSION"
NODEPS=()
rpm -q rpm >/dev/null 2>&1 || NODEPS=(--nodeps)
rpmbuild -bb "${NODEPS[@]}" --define "_topdir $TOP" --define "version_override $VERSION" \
    "${DEFS[@]}" "$SRC/packaging/rpm/lustre-alloc.spec" >"$TOP/build.log" 2>&1 || {
    tail -40 "$TOP/build.log" >&2; echo "build-rpm.sh: rpmbuild failed" >&2; exit 1; }
find "$TOP/RPMS" -name '*.rpm' -exec mv {} "$OUT/" \;
ls -1 "$OUT"/*.rpm
