#!/usr/bin/env bash
# Install lustre-alloc on a Lustre server (mapper, broker, collector) and/or a client (the shim)
# in the documented layout (docs/operations.md, "Install"):
#
#   /opt/lustre-alloc/            a Python venv: bin/lustre-alloc-{mapper,broker,collector,...}
#   /opt/lustre-alloc/lib/        liblustre_alloc.so (LD_PRELOAD), liblustre_alloc_api.so
#   /opt/lustre-alloc/include/    lustre_alloc.h
#   /opt/lustre-alloc/share/doc/lustre-alloc/   operations.md, protocol.md, client.md, prometheus/
#   /etc/systemd/system/lustre-alloc-{mapper,broker,collector}.service
#   /etc/lustre-alloc/{mapper,broker,collector}.toml   (never overwritten)
#   /etc/lustre-alloc/keys/{clients,authorized}/       CURVE public keys (allow-lists)
#
# Debian 12 / Ubuntu 22.04+ (python3 >= 3.11) and EL9 (RHEL, Rocky, Alma: python3.11 from the
# distribution's AppStream; zeromq-devel from EPEL for the shim).
#
# Usage: deploy/install.sh [--prefix DIR] [--destdir DIR] [--deps] [--no-venv] [--no-shim]
#   --deps      install the distribution packages first (apt-get / dnf)
#   --destdir   stage everything under DIR (packaging, tests); no user is created
#   --no-venv   skip the Python venv (client-only nodes, tests)
#   --no-shim   skip building the C shim (server-only nodes)
set -euo pipefail

PREFIX=/opt/lustre-alloc
DESTDIR=""
DEPS=0
VENV=1
SHIM=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX="$2"; shift 2 ;;
        --destdir) DESTDIR="$2"; shift 2 ;;
        --deps) DEPS=1; shift ;;
        --no-venv) VENV=0; shift ;;
        --no-shim) SHIM=0; shift ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
SRC=$(cd "$(dirname "$0")/.." && pwd)

# ---------------------------------------------------------------- distribution
FAMILY=unknown
if [ -r /etc/os-release ]; then
    . /etc/os-release
    case " ${ID:-} ${ID_LIKE:-} " in
        *" debian "*|*" ubuntu "*) FAMILY=debian ;;
        *" rhel "*|*" centos "*|*" fedora "*|*" rocky "*|*" almalinux "*) FAMILY=el ;;
    esac
fi
case "$FAMILY" in
    el) PYTHON=${PYTHON:-python3.11} ;;       # EL9's python3 is 3.9: use the 3.11 stream
    *) PYTHON=${PYTHON:-python3} ;;
esac

if [ "$DEPS" = 1 ]; then
    case "$FAMILY" in
        debian) apt-get install -y python3 python3-venv build-essential pkg-config \
                    libzmq3-dev libmsgpack-dev ;;
        el) dnf install -y python3.11 python3.11-pip gcc make pkgconf-pkg-config
            dnf install -y epel-release && dnf install -y zeromq-devel msgpack-devel ;;
        *) echo "install.sh: unknown distribution; install python3.11, libzmq and msgpack-c" \
               "development packages yourself" >&2; exit 2 ;;
    esac
fi

# ---------------------------------------------------------------- Python venv
if [ "$VENV" = 1 ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
        echo "install.sh: $PYTHON is older than 3.11 (EL9: dnf install python3.11)" >&2; exit 2; }
    "$PYTHON" -m venv "$DESTDIR$PREFIX"
    "$DESTDIR$PREFIX/bin/pip" install --quiet "$SRC[collector,mapper]"
fi

# ---------------------------------------------------------------- the shim
if [ "$SHIM" = 1 ]; then
    # `install` builds only the two libraries it installs (not the test programs)
    make -s -C "$SRC/liblustre_alloc" BUILD="${BUILD:-.}" install PREFIX="$PREFIX" DESTDIR="$DESTDIR"
fi

# ---------------------------------------------------------------- units, configs, docs
install -d "$DESTDIR/etc/systemd/system"
for unit in "$SRC/mapper/service/systemd/lustre-alloc-mapper.service" \
            "$SRC/collectors/systemd/lustre-alloc-broker.service" \
            "$SRC/collectors/systemd/lustre-alloc-collector.service"; do
    sed "s#/opt/lustre-alloc#$PREFIX#g" "$unit" > "$DESTDIR/etc/systemd/system/$(basename "$unit")"
    chmod 0644 "$DESTDIR/etc/systemd/system/$(basename "$unit")"
done
install -d -m 0755 "$DESTDIR/etc/lustre-alloc" "$DESTDIR/etc/lustre-alloc/keys" \
    "$DESTDIR/etc/lustre-alloc/keys/clients" "$DESTDIR/etc/lustre-alloc/keys/authorized"
for pair in "mapper/service/systemd/mapper.toml.example:mapper.toml" \
            "collectors/systemd/broker.toml.example:broker.toml" \
            "collectors/systemd/collector.toml.example:collector.toml"; do
    dst="$DESTDIR/etc/lustre-alloc/${pair#*:}"
    [ -e "$dst" ] || install -m 0640 "$SRC/${pair%%:*}" "$dst"
done
DOC="$DESTDIR$PREFIX/share/doc/lustre-alloc"
install -d "$DOC/prometheus"
install -m 0644 "$SRC/docs/operations.md" "$SRC/docs/protocol.md" "$SRC/docs/client.md" "$DOC/"
install -m 0644 "$SRC/deploy/prometheus/"*.yml "$DOC/prometheus/"

# ---------------------------------------------------------------- user (real installs only)
if [ -z "$DESTDIR" ]; then
    if ! id lustre-alloc >/dev/null 2>&1; then
        nologin=$(command -v nologin || echo /sbin/nologin)
        useradd --system --no-create-home --home-dir /var/lib/lustre-alloc \
            --shell "$nologin" lustre-alloc
    fi
    chgrp lustre-alloc /etc/lustre-alloc/mapper.toml /etc/lustre-alloc/broker.toml
    systemctl daemon-reload 2>/dev/null || true
fi

cat <<MSG
Installed under ${DESTDIR:-/} (prefix $PREFIX). Next (docs/operations.md, "Install"):
  cd /etc/lustre-alloc/keys && $PREFIX/bin/lustre-alloc-broker --keygen broker --keys-dir .
  $PREFIX/bin/lustre-alloc-broker --keygen mapper --keys-dir .     # secret keys: 0600 root
  cp mapper.key authorized/ ; cp <each collector>.key authorized/ ; cp <each client>.key clients/
  systemctl enable --now lustre-alloc-broker lustre-alloc-mapper   # on the MDS
  systemctl enable --now lustre-alloc-collector                    # on every OSS and the MDS
MSG
