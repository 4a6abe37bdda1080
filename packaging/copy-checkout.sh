#!/usr/bin/env bash
# Copy this checkout's tracked and new (not ignored) files into DEST: the source a package is
# built from (no .venv, no build products, no .git).
# Usage: packaging/copy-checkout.sh DEST
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:?usage: packaging/copy-checkout.sh DEST}
mkdir -p "$DEST"
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) |
    tar -C "$DEST" -xf -
