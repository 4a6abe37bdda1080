#!/usr/bin/env bash
# Driver of scripts/lustre-vm.sh: argument parsing, the cache key, then build.sh or boot.sh.
set -euo pipefail
vmdir=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$vmdir/../.." && pwd)

usage() {
    echo "usage: lustre-vm.sh {build|run|test} [--lustre-src DIR] [--ref REF] [--ior-src DIR]" \
         "[--osd zfs|ldiskfs] [--mdts 1|2] [--timeout S] [-- CMD...]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
action=$1; shift
lustre_src=${LUSTRE_SRC:-}
ref=${LUSTRE_REF:-v2_17_0}
ior_src=${IOR_SRC:-}
ior_ref=${IOR_REF:-4.0.0}
timeout_s=${LUSTRE_VM_TIMEOUT_S:-1800}
# The file system the guest formats (not part of the image): the OSTs' OSD and the MDT count.
osd=${LUSTRE_VM_OSD:-zfs}
mdts=${LUSTRE_VM_MDTS:-1}
while [ $# -gt 0 ]; do
    case $1 in
        --lustre-src) lustre_src=$2; shift 2 ;;
        --ref) ref=$2; shift 2 ;;
        --ior-src) ior_src=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --osd) osd=$2; shift 2 ;;
        --mdts) mdts=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
    esac
done
case $action in build|run|test) ;; *) usage ;; esac
case $osd in zfs|ldiskfs) ;; *) echo "lustre-vm: --osd $osd: zfs or ldiskfs" >&2; exit 2 ;; esac
case $mdts in 1|2) ;; *) echo "lustre-vm: --mdts $mdts: 1 or 2" >&2; exit 2 ;; esac

# The Lustre tree: a work tree (has .git) or a bare repository (the fetched mirror).
if [ -z "$lustre_src" ]; then
    for guess in /work/.mirror/lustre+lustre-release/repo "$checkout/../lustre-release"; do
        if [ -d "$guess" ]; then lustre_src=$guess; break; fi
    done
fi
[ -n "$lustre_src" ] && [ -d "$lustre_src" ] || {
    echo "lustre-vm: no lustre-release tree: pass --lustre-src DIR (a git clone of lustre/lustre-release)" >&2
    exit 2
}
if git --git-dir="$lustre_src/.git" rev-parse --verify -q "$ref^{commit}" >/dev/null 2>&1; then
    lustre_git=$lustre_src/.git
elif git --git-dir="$lustre_src" rev-parse --verify -q "$ref^{commit}" >/dev/null 2>&1; then
    lustre_git=$lustre_src
else
    echo "lustre-vm: $lustre_src: no git commit named $ref" >&2
    exit 2
fi
lustre_commit=$(git --git-dir="$lustre_git" rev-parse "$ref^{commit}")

# IOR and mdtest (optional: the tier skips their tests without them): a clone of hpc/ior.
if [ -z "$ior_src" ] && [ -d /work/.mirror/hpc+ior/repo ]; then ior_src=/work/.mirror/hpc+ior/repo; fi
ior_git= ior_commit=
if [ -n "$ior_src" ]; then
    for g in "$ior_src/.git" "$ior_src"; do
        if git --git-dir="$g" rev-parse --verify -q "$ior_ref^{commit}" >/dev/null 2>&1; then
            ior_git=$g; ior_commit=$(git --git-dir="$g" rev-parse "$ior_ref^{commit}"); break
        fi
    done
    [ -n "$ior_git" ] || { echo "lustre-vm: $ior_src: no git commit named $ior_ref" >&2; exit 2; }
fi
# The cache key: every input of the image. The Debian packages are taken as the mirror serves
# them on the day of the build; the resolved kernel is recorded in the cache's manifest.
key=$(cat "$vmdir/build.sh" "$vmdir/guest-init" "$vmdir/packages.txt" \
          "$vmdir"/ldiskfs-debian12/series "$vmdir"/ldiskfs-debian12/patches/*.patch \
          <(echo "$lustre_commit $ior_commit") | sha256sum | cut -c1-16)
cache_root=${LUSTRE_VM_CACHE:-$HOME/.cache/lustre-alloc-vm}
cache=$cache_root/$key
work=$cache_root/work-${lustre_commit:0:12}
LUSTRE_VM_OSD=$osd LUSTRE_VM_MDTS=$mdts
export LUSTRE_VM_OSD LUSTRE_VM_MDTS
export vmdir checkout lustre_git lustre_commit ref ior_git ior_commit ior_ref cache timeout_s work

if [ ! -f "$cache/ready" ]; then
    if [ "$action" != build ]; then
        echo "lustre-vm: no guest built for these inputs ($cache); building it first" >&2
    fi
    bash "$vmdir/build.sh"
fi
[ "$action" = build ] && { echo "lustre-vm: guest ready in $cache"; exit 0; }
if [ "$osd" = ldiskfs ] && ! grep -q '^osds=.*ldiskfs' "$cache/manifest"; then
    echo "lustre-vm: this guest has no ldiskfs OSD ($(grep '^osds=' "$cache/manifest" || echo 'osds=zfs')):" \
         "scripts/lustre-vm/ldiskfs-debian12 is for Lustre 2.17 on Debian 12's 6.1 kernel" >&2
    exit 2
fi

if [ "$action" = test ]; then
    exec bash "$vmdir/boot.sh" bash /src/tests/lustre/run_tier.sh "$@"
fi
[ $# -ge 1 ] || usage
exec bash "$vmdir/boot.sh" "$@"
