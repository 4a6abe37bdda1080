#!/usr/bin/env bash
# Builds the guest into $cache (called by main.sh; environment: vmdir lustre_git lustre_commit
# ref cache). Every compile runs in a chroot of the guest's own Debian 12 root at native speed:
# ZFS's kernel modules from zfs-dkms's source, then Lustre client and server with the ZFS OSD,
# against the kernel the guest boots. Steps and pitfalls: docs/lustre-vm.md.
set -euo pipefail
: "${vmdir:?}" "${lustre_git:?}" "${lustre_commit:?}" "${cache:?}"
[ "$(id -u)" = 0 ] || { echo "lustre-vm build: needs root (debootstrap, chroot)" >&2; exit 2; }

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
jobs=${JOBS:-$(nproc)}
# The build trees, kept between builds: a step redone only when its marker is gone (a
# changed packages.txt redoes the packages; rm -rf the folder for a clean build).
work=${work:-$cache.work}
root=$work/root
log=$work/build.log
mkdir -p "$work"
echo "lustre-vm build: into $cache (log: $log)"
t0=$(date +%s)
step() { echo "lustre-vm build: [$(( $(date +%s) - t0 )) s] $*"; }

host_pkgs=(qemu-system-x86 qemu-utils debootstrap e2fsprogs)
missing=()
for p in "${host_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    step "host packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >>"$log" 2>&1
fi

mounted=()
cleanup() {
    for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { mkdir -p "$2"; mount --bind "$1" "$2"; mounted+=("$2"); }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }

# 1. The root: debootstrap minbase, contrib for ZFS, security for the current kernel.
if [ ! -f "$work/root.done" ]; then
    step "debootstrap bookworm (minbase)"
    rm -rf "$root"
    debootstrap --variant=minbase --components=main,contrib bookworm "$root" "$mirror" >>"$log" 2>&1
    cat >"$root/etc/apt/sources.list" <<SRC
deb $mirror bookworm main contrib
deb $mirror bookworm-updates main contrib
deb $security bookworm-security main contrib
SRC
    touch "$work/root.done"
fi
bind /proc "$root/proc"; bind /sys "$root/sys"; bind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"

pkgs_sum=$(sha256sum "$vmdir/packages.txt" | cut -c1-16)
if [ "$(cat "$work/packages.done" 2>/dev/null)" != "$pkgs_sum" ]; then
    step "guest packages (packages.txt)"
    # zfs-dkms is not installed (its postinst would build for the host's kernel); its
    # license prompt is answered for zfsutils' debconf anyway.
    echo "zfs-dkms zfs-dkms/note-incompatible-licenses note true" | in_root debconf-set-selections
    in_root apt-get update -qq >>"$log" 2>&1
    mapfile -t pkgs < <(grep -v '^\s*#' "$vmdir/packages.txt" | grep -v '^\s*$')
    in_root apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1
    echo "$pkgs_sum" >"$work/packages.done"
fi
kver=$(ls "$root/lib/modules" | sort -V | tail -1)
kobj=/usr/src/linux-headers-$kver
ksrc=/usr/src/linux-headers-${kver%-amd64}-common
step "kernel $kver"

# 2. ZFS kernel modules from zfs-dkms's source (its Module.symvers is what Lustre links to).
zfs_dir=/build/zfs
if [ ! -f "$work/zfs.done" ]; then
    step "ZFS kernel modules"
    in_root bash -c "cd /tmp && apt-get download -qq zfs-dkms && rm -rf /build/zfs /tmp/zfs-x \
        && mkdir -p /build /tmp/zfs-x && dpkg-deb -x zfs-dkms_*.deb /tmp/zfs-x \
        && basename /tmp/zfs-x/usr/src/zfs-* >/build/zfs.version \
        && mv /tmp/zfs-x/usr/src/zfs-* $zfs_dir && rm -rf /tmp/zfs-x zfs-dkms_*.deb" >>"$log" 2>&1
    in_root bash -c "cd $zfs_dir && ./configure --with-config=kernel --with-linux=$ksrc \
        --with-linux-obj=$kobj && make -j$jobs && make install" >>"$log" 2>&1
    touch "$work/zfs.done"
fi

# 3. Lustre from the given tree. git archive of a fetched mirror misses three test tarballs:
#    excluded, then empty placeholders so lustre/tests' make finds them.
lustre_dir=/build/lustre
lustre_version=$(git --git-dir="$lustre_git" show "$lustre_commit:LUSTRE-VERSION-GEN" \
                 | sed -n 's/^DEFAULT_VERSION=//p')
# The OSDs built: ZFS always; ldiskfs too where the project carries a series for this kernel
# and Lustre (scripts/lustre-vm/ldiskfs-debian12/README.md: Lustre 2.17 on Debian 12's 6.1).
# ldiskfs is ext4 patched at build time, so it needs the kernel's full source at the
# kernel's exact version (linux-source-6.1 of the same Debian revision as the image).
osds=zfs
case "$lustre_version:$kver" in
    2.17.*:6.1.0-*-amd64)
        # the series' own hash in the marker: an edited patch rebuilds Lustre
        osds="zfs ldiskfs $(cat "$vmdir/ldiskfs-debian12/series" \
                           "$vmdir"/ldiskfs-debian12/patches/*.patch | sha256sum | cut -c1-12)" ;;
esac
linux_src=/build/linux-source-6.1
if [[ $osds == *ldiskfs* ]]; then
    kpkg_version=$(in_root dpkg-query -W -f='${Version}' "linux-image-$kver")
    if [ "$(cat "$work/linux-source.done" 2>/dev/null)" != "$kpkg_version" ]; then
        step "kernel source $kpkg_version (for ldiskfs)"
        in_root apt-get install -y -qq --no-install-recommends \
            "linux-source-6.1=$kpkg_version" >>"$log" 2>&1
        in_root bash -c "rm -rf $linux_src && cd /build \
            && tar -xJf /usr/src/linux-source-6.1.tar.xz" >>"$log" 2>&1
        echo "$kpkg_version" >"$work/linux-source.done"
        rm -f "$work/lustre.done"
    fi
fi
lustre_done=$(cat "$work/lustre.done" 2>/dev/null || echo none)
[ -z "$lustre_done" ] && lustre_done=zfs   # a marker written before ldiskfs was built
if [ "$lustre_done" != "$osds" ]; then
    step "Lustre $ref ($lustre_commit): configure"
    rm -rf "$root$lustre_dir"; mkdir -p "$root$lustre_dir"
    missing_tars=(lustre/tests/disk2_12-ldiskfs.tar.bz2 lustre/tests/disk2_15-ldiskfs.tar.bz2
                  lustre/tests/disk2_15-zfs.tar.bz2)
    excludes=(); for f in "${missing_tars[@]}"; do excludes+=(":(exclude)$f"); done
    # (git still prints "invalid object" for the first excluded blob; the archive is whole)
    git --git-dir="$lustre_git" archive "$lustre_commit" -- . "${excludes[@]}" 2>/dev/null \
        | tar -x -C "$root$lustre_dir"
    for f in "${missing_tars[@]}"; do [ -e "$root$lustre_dir/$f" ] || : >"$root$lustre_dir/$f"; done
    # No .git in an archive: LUSTRE-VERSION-GEN reads this file instead.
    version=$(sed -n 's/^DEFAULT_VERSION=//p' "$root$lustre_dir/LUSTRE-VERSION-GEN")
    echo "LUSTRE_VERSION = $version" >"$root$lustre_dir/LUSTRE-VERSION-FILE"
    # Lustre's configure links its tests against $zfs_dir/Module.symvers (KBUILD_EXTRA_SYMBOLS);
    # ZFS 2.1 leaves it in module/ (without it: "dsl_pool_config_enter/exit do not exist")
    cp "$root$zfs_dir/module/Module.symvers" "$root$zfs_dir/Module.symvers"
    # 2.15.x under Debian 12's GCC 12: its first compile error is a warning made fatal,
    # lustre/quota/qmt_entry.c:1029: "the comparison will always evaluate as 'true' for the
    # address of 'qti_lqes_rstr_small' will never be NULL [-Werror=address]" (v2_15_8).
    # Its configure has no --disable-werror: lustre-core.m4 LC_CONFIGURE adds "-Wall -Werror"
    # on x86_64 unconditionally, so for 2.15 refs that line loses -Werror. 2.17.0 builds
    # with it.
    case "$version" in
        2.15.*) sed -i 's/CFLAGS="$CFLAGS -Wall -Werror"/CFLAGS="$CFLAGS -Wall"/' \
                    "$root$lustre_dir/lustre/autoconf/lustre-core.m4" ;;
    esac
    ldiskfs_opts="--disable-ldiskfs" linux_opt=$ksrc series_env=
    if [[ $osds == *ldiskfs* ]]; then
        series_dir=$root$lustre_dir/ldiskfs/kernel_patches
        mkdir -p "$series_dir/patches/debian12"
        cp "$vmdir"/ldiskfs-debian12/patches/*.patch "$series_dir/patches/debian12/"
        cp "$vmdir/ldiskfs-debian12/series" "$series_dir/series/ldiskfs-6.1-debian12.series"
        # Lustre's configure test of set_posix_acl() with a user namespace (v2_17_0
        # config/lustre-core.m4 LC_SRC_SET_POSIX_ACL_USER_NS) includes only
        # <linux/posix_acl.h>, whose inline cache_no_acl() needs struct inode on 6.1: the
        # test fails, and osd-ldiskfs (osd_internal.h) calls set_posix_acl() with the
        # prototype of older kernels ("too few arguments"). With <linux/fs.h> first it passes.
        sed -i '/LB2_LINUX_TEST_SRC(\[set_posix_acl_user_ns\]/{n;s|#include <linux/posix_acl.h>|#include <linux/fs.h>\n\t\t#include <linux/posix_acl.h>|}' \
            "$root$lustre_dir/config/lustre-core.m4"
        grep -A1 'LB2_LINUX_TEST_SRC(\[set_posix_acl_user_ns\]' \
            "$root$lustre_dir/config/lustre-core.m4" | grep -q 'linux/fs.h' \
            || { echo "lustre-vm build: set_posix_acl configure test not found" >&2; exit 1; }
        # ldiskfs is built from the full source's fs/ext4 ($LINUX/fs/ext4), so --with-linux
        # is the unpacked source; the generated headers stay the packaged ones.
        ldiskfs_opts="--enable-ldiskfs" linux_opt=$linux_src
        series_env="LDISKFS_SERIES=6.1-debian12.series"
    fi
    in_root bash -c "cd $lustre_dir && sh autogen.sh && $series_env ./configure --enable-server \
        $ldiskfs_opts --with-zfs=$zfs_dir --with-zfs-obj=$zfs_dir --with-linux=$linux_opt \
        --with-linux-obj=$kobj --with-o2ib=no --disable-gss --disable-doc" >>"$log" 2>&1
    step "Lustre: make -j$jobs"
    in_root bash -c "cd $lustre_dir && make -j$jobs" >>"$log" 2>&1
    in_root bash -c "cd $lustre_dir && make install && depmod $kver && ldconfig" >>"$log" 2>&1
    echo "$osds" >"$work/lustre.done"
fi

# 4. Python for the tier: the collector, broker and mapper run in the guest.
if [ ! -f "$work/venv.done" ]; then
    step "guest virtualenv (/opt/lustre-alloc-venv)"
    # pip inside the chroot trusts what the host's pip trusts (a site's TLS proxy, say)
    cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/etc/lustre-vm-pip-ca.crt"
    in_root python3 -m venv /opt/lustre-alloc-venv >>"$log" 2>&1
    in_root /opt/lustre-alloc-venv/bin/pip install -q --cert /etc/lustre-vm-pip-ca.crt \
        pyzmq msgpack psutil PyYAML prometheus-client numpy ortools networkx pytest \
        pytest-timeout >>"$log" 2>&1
    touch "$work/venv.done"
fi

# 4b. IOR and mdtest (hpc/ior, when given), with Open MPI and IOR's Lustre striping options
#     (--posix.lustre.*: an O_LOV_DELAY_CREATE open then LL_IOC_LOV_SETSTRIPE, the sequence
#     ROMIO's Lustre driver uses; Debian's Open MPI and MPICH ship ROMIO without that driver).
ior_done=$(cat "$work/ior.done" 2>/dev/null || true)
if [ -n "${ior_commit:-}" ] && [ "$ior_done" != "$ior_commit" ]; then
    step "IOR and mdtest ($ior_ref, $ior_commit)"
    rm -rf "$root/build/ior"; mkdir -p "$root/build/ior"
    git --git-dir="$ior_git" archive "$ior_commit" | tar -x -C "$root/build/ior"
    in_root bash -c "cd /build/ior && ./bootstrap && ./configure --with-lustre \
        --prefix=/usr/local && make -j$jobs && make install" >>"$log" 2>&1
    echo "$ior_commit" >"$work/ior.done"
fi

# 5. What a booted Lustre node needs (lustre-vm-notes): /etc/mtab a link to the kernel's mounts
#    (else mount.lustre writes one into the image and the next mkfs.lustre refuses), no stale
#    zpool cache, a host name in /etc/hosts, our init.
step "guest configuration and image"
ln -sf /proc/self/mounts "$root/etc/mtab"
rm -f "$root/etc/zfs/zpool.cache"
echo lustre-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n10.0.2.15 lustre-vm\n' >"$root/etc/hosts"
install -m 0755 "$vmdir/guest-init" "$root/sbin/lustre-vm-init"
in_root update-initramfs -u -k "$kver" >>"$log" 2>&1
cleanup; mounted=()

# The image leaves the build trees out (they stay in $work for a rebuild).
mkdir -p "$cache.tmp"
cp "$root/boot/vmlinuz-$kver" "$cache.tmp/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$cache.tmp/initrd"
mkdir -p "$work/empty"
mount --bind "$work/empty" "$root/build"; mounted+=("$root/build")
rm -f "$cache.tmp/root.img"
mkfs.ext4 -q -F -L lustre-vm -d "$root" "$cache.tmp/root.img" 12G >>"$log" 2>&1
cleanup; mounted=()
{
    echo "lustre_ref=$ref"
    echo "lustre_commit=$lustre_commit"
    echo "kernel=$kver"
    echo "zfs=$(cat "$root/build/zfs.version")"
    echo "osds=$osds"
    echo "ior=${ior_ref:-} ${ior_commit:-none}"
    echo "built=$(date -u +%FT%TZ) in $(( $(date +%s) - t0 )) s"
} >"$cache.tmp/manifest"
rm -rf "$cache"; mv "$cache.tmp" "$cache"; touch "$cache/ready"
step "done: $cache"
