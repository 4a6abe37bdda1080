#!/usr/bin/env bash
# Build the Debian packages (collector, mapper, client) with dpkg-buildpackage, from a copy of
# this checkout (the repository root keeps no debian/ directory).
#
# Usage: packaging/build-deb.sh OUTDIR [--wheelhouse DIR] [--fast]
#   --wheelhouse  build the venvs from the wheels in DIR only (offline)
#   --fast        gzip -1 instead of xz (the tests: same contents, larger files, much sooner)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: packaging/build-deb.sh OUTDIR [--wheelhouse DIR]}
shift
WHEELHOUSE=""
COMPRESSION="-Zxz"
while [ $# -gt 0 ]; do
    case "$1" in
        --wheelhouse) WHEELHOUSE=$(cd "$2" && pwd); shift 2 ;;
        --fast) COMPRESSION="-Zgzip -z1"; shift ;;
        *) echo "build-deb.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$SRC/lustre_alloc/common/version.py")
"$SRC/packaging/copy-checkout.sh" "$WORK/lustre-alloc-$VERSION"
cp -r "$SRC/packaging/debian" "$WORK/lustre-alloc-$VERSION/debian"
cat > "$WORK/lustre-alloc-$VERSION/debian/changelog" <<CHANGELOG
lustre-alloc ($VERSION) unstable; urgency=medium

  * Built from $(cd "$SRC" && git describe --always --dirty 2>/dev/null || echo a checkout).

 -- lustre-alloc developers <lustre-alloc@localhost>  $(date -R)
CHANGELOG
cd "$WORK/lustre-alloc-$VERSION"
WHEELHOUSE="$WHEELHOUSE" DEB_COMPRESSION="$COMPRESSION" dpkg-buildpackage -us -uc -b --no-sign >"$WORK/build.log" 2>&1 || {
    tail -40 "$WORK/build.log" >&2; echo "build-deb.sh: dpkg-buildpackage failed" >&2; exit 1; }
mv "$WORK"/*.deb "$OUT/"
ls -1 "$OUT"/*.deb
