#!/usr/bin/env bash
# Installs everything lustre-alloc needs on a Debian 12 machine (run as root):
# Debian packages, a virtualenv in .venv with the project and its test tools.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(python3-venv build-essential pkg-config libzmq3-dev libmsgpack-dev valgrind iproute2 systemd rpm rpmlint)  # systemd: systemd-analyze verify of the units (tests/test_deploy.py); rpm, rpmlint: the RPMs (tests/test_rpm_packages.py; dpkg-buildpackage comes with build-essential)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.lustre-alloc-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ]; then
    echo "setup: pip install -e .[all,test] (first time takes about two minutes)"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[all,test]'
    touch "$stamp"
fi
make -s -C liblustre_alloc  # liblustre_alloc.so, liblustre_alloc_api.so and C tests (docs/client.md)
