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
# Usage: deploy/install.sh [--role ROLE]... [--prefix DIR] [--destdir DIR] [--deps]
#                          [--wheelhouse DIR] [--no-venv] [--no-shim]
#   --role      what this node runs (repeatable; default all):
#                 collector  the collector and the broker (every OSS; the MDS too): [collector]
#                 mapper     the mapper (the MDS): [mapper]
#                 client     the shim only (compute nodes): no venv
#                 all        everything
#   --deps      install the distribution packages first (apt-get / dnf)
#   --wheelhouse install the Python packages from the wheels in DIR only (no package index:
#               pip download 'lustre-alloc[...]' -d DIR on a connected host)
#   --destdir   stage everything under DIR (packaging, tests); no user is created
#   --no-venv   skip the Python venv (tests)
#   --no-shim   skip building the C shim
set -euo pipefail

PREFIX=/opt/lustre-alloc
DESTDIR=""
DEPS=0
VENV=1
SHIM=1
ROLES=""
WHEELHOUSE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --role)
            case "${2:-}" in
                collector|mapper|client|all) ROLES="$ROLES $2" ;;
                *) echo "install.sh: --role takes collector, mapper, client or all (see --help)" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --wheelhouse) WHEELHOUSE="$2"; shift 2 ;;
        --prefix) PREFIX="$2"; shift 2 ;;
        --destdir) DESTDIR="$2"; shift 2 ;;
        --deps) DEPS=1; shift ;;
        --no-venv) VENV=0; shift ;;
        --no-shim) SHIM=0; shift ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
case " ${ROLES:- all} " in *" all "*) ROLES="collector mapper client" ;; esac
has_role() { case " $ROLES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
EXTRAS=""
has_role collector && EXTRAS="collector"
has_role mapper && EXTRAS="${EXTRAS:+$EXTRAS,}mapper"
has_role client || SHIM=0
[ -n "$EXTRAS" ] || VENV=0           # a client node needs no Python
echo "install.sh: roles:$(printf ' %s' $ROLES); Python extras: ${EXTRAS:-none}"

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
    if [ -n "$WHEELHOUSE" ]; then        # offline: the wheels in DIR, no package index
        "$DESTDIR$PREFIX/bin/pip" install --quiet --no-index --find-links "$WHEELHOUSE" "$SRC[$EXTRAS]"
    else
        "$DESTDIR$PREFIX/bin/pip" install --quiet "$SRC[$EXTRAS]"
    fi
    if [ -n "$DESTDIR" ]; then
        # a staged venv must run from $PREFIX once installed: its scripts' #! lines and
        # activate name the staging path
        grep -rlI --null "$DESTDIR$PREFIX" "$DESTDIR$PREFIX/bin" "$DESTDIR$PREFIX/pyvenv.cfg" |
            xargs -0 -r sed -i "s#$DESTDIR$PREFIX#$PREFIX#g"
        rm -rf "$DESTDIR$PREFIX"/lib/python3*/site-packages/pip "$DESTDIR$PREFIX"/bin/pip*
        find "$DESTDIR$PREFIX" -name __pycache__ -type d -prune -exec rm -rf {} +
    fi
fi

# ---------------------------------------------------------------- the shim
if [ "$SHIM" = 1 ]; then
    # `install` builds only the two libraries it installs (not the test programs)
    make -s -C "$SRC/liblustre_alloc" BUILD="${BUILD:-.}" install PREFIX="$PREFIX" DESTDIR="$DESTDIR"
fi

# ---------------------------------------------------------------- units, configs, docs
UNITS=""
CONFIGS=""
if has_role mapper; then
    UNITS="$UNITS lustre_alloc/mapper/service/systemd/lustre-alloc-mapper.service"
    CONFIGS="$CONFIGS lustre_alloc/mapper/service/systemd/mapper.toml.example:mapper.toml"
fi
if has_role collector; then
    UNITS="$UNITS lustre_alloc/collectors/systemd/lustre-alloc-broker.service lustre_alloc/collectors/systemd/lustre-alloc-collector.service"
    CONFIGS="$CONFIGS lustre_alloc/collectors/systemd/broker.toml.example:broker.toml lustre_alloc/collectors/systemd/collector.toml.example:collector.toml"
fi
install -d "$DESTDIR/etc/systemd/system"
for unit in $UNITS; do
    sed "s#/opt/lustre-alloc#$PREFIX#g" "$SRC/$unit" > "$DESTDIR/etc/systemd/system/$(basename "$unit")"
    chmod 0644 "$DESTDIR/etc/systemd/system/$(basename "$unit")"
done
install -d -m 0755 "$DESTDIR/etc/lustre-alloc" "$DESTDIR/etc/lustre-alloc/keys" \
    "$DESTDIR/etc/lustre-alloc/keys/clients" "$DESTDIR/etc/lustre-alloc/keys/authorized"
for pair in $CONFIGS; do
    dst="$DESTDIR/etc/lustre-alloc/${pair#*:}"
    [ -e "$dst" ] || install -m 0640 "$SRC/${pair%%:*}" "$dst"
done
DOC="$DESTDIR$PREFIX/share/doc/lustre-alloc"
install -d "$DOC/prometheus"
install -m 0644 "$SRC/docs/operations.md" "$SRC/docs/protocol.md" "$SRC/docs/client.md" \
    "$SRC/docs/rebalance.md" "$DOC/"
install -m 0644 "$SRC/deploy/prometheus/"*.yml "$DOC/prometheus/"
# the collector's drop-in for a steering agent (docs/operations.md): shipped, not enabled
install -m 0644 "$SRC/lustre_alloc/collectors/systemd/steer-agent.conf" "$DOC/"
# the migration service's unit and configuration (docs/rebalance.md): shipped, not enabled
install -m 0644 "$SRC/lustre_alloc/rebalance/systemd/lustre-alloc-migrate.service" \
    "$SRC/lustre_alloc/rebalance/systemd/migrate.toml.example" "$DOC/"

# ---------------------------------------------------------------- user (real installs only)
if [ -z "$DESTDIR" ]; then
    if ! id lustre-alloc >/dev/null 2>&1; then
        nologin=$(command -v nologin || echo /sbin/nologin)
        useradd --system --no-create-home --home-dir /var/lib/lustre-alloc \
            --shell "$nologin" lustre-alloc
    fi
    for cfg in /etc/lustre-alloc/mapper.toml /etc/lustre-alloc/broker.toml; do
        [ -e "$cfg" ] && chgrp lustre-alloc "$cfg"
    done
    systemctl daemon-reload 2>/dev/null || true
fi

echo "Installed under ${DESTDIR:-/} (prefix $PREFIX). Next (docs/operations.md, \"Install\"):"
echo "  $PREFIX/bin/lustre-alloc-selftest ...           # rollout step 0: check this node first"
if has_role mapper; then
    cat <<MSG
  cd /etc/lustre-alloc/keys && $PREFIX/bin/lustre-alloc-broker --keygen broker --keys-dir .
  $PREFIX/bin/lustre-alloc-broker --keygen mapper --keys-dir .     # secret keys: 0600 root
  cp mapper.key authorized/ ; cp <each collector>.key authorized/ ; cp <each client>.key clients/
  systemctl enable --now lustre-alloc-broker lustre-alloc-mapper   # on the MDS (starts in shadow mode)
MSG
fi
if has_role collector; then
    cat <<MSG
  $PREFIX/bin/lustre-alloc-broker --keygen collector --keys-dir /etc/lustre-alloc/keys
  (copy collector.key to the broker's authorized/ as <this host>.key)
  systemctl enable --now lustre-alloc-collector                    # on every OSS and the MDS
MSG
fi
if has_role client; then
    cat <<MSG
  LD_PRELOAD=$PREFIX/lib/liblustre_alloc.so, or the Lmod module deploy/modulefiles/lustre-alloc/0.1.lua
  (docs/client.md); LUSTRE_ALLOC_MAPPER=tcp://<mds>:5558
MSG
fi
