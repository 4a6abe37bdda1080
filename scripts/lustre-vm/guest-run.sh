#!/usr/bin/env bash
# Runs inside the guest (from guest-init): brings up a single-node Lustre over files
# (MGS+MDT0 on ZFS, MDT1 too with LUSTRE_VM_MDTS=2, four OSTs on ZFS or, with
# LUSTRE_VM_OSD=ldiskfs, on ldiskfs; a client at /mnt/lustre), then the command the host
# gave in /out/cmd. Steps from lustre-vm-notes (docs/lustre-vm.md): LNet on eth0,
# mkfs.lustre over sparse files, mount the targets, the client, and wait until every OSP has
# precreated.
set -euo pipefail
export PATH=/opt/lustre-alloc-venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
fsname=lustre
mnt=/mnt/lustre
nost=${LUSTRE_VM_OSTS:-4}
t0=$(date +%s)
say() { echo "guest: [$(( $(date +%s) - t0 )) s] $*"; }

say "kernel $(uname -r), $(nproc) CPUs; network: $(ls /sys/class/net | tr "\n" " ")"
# shellcheck disable=SC1091
[ -f /out/settings ] && . /out/settings
osd=${LUSTRE_VM_OSD:-zfs}
nmdt=${LUSTRE_VM_MDTS:-1}
case $osd in zfs|ldiskfs) ;; *) echo "guest: LUSTRE_VM_OSD=$osd: zfs or ldiskfs" >&2; exit 2 ;; esac
case $nmdt in 1|2) ;; *) echo "guest: LUSTRE_VM_MDTS=$nmdt: 1 or 2" >&2; exit 2 ;; esac
export LUSTRE_VM_SLOW_OST LUSTRE_VM_ZFS_DIRTY_MAX
if [ -n "${LUSTRE_VM_ZFS_DIRTY_MAX:-}" ]; then
    modprobe zfs zfs_dirty_data_max="$LUSTRE_VM_ZFS_DIRTY_MAX"
else
    modprobe zfs
fi
modprobe lnet networks='tcp0(eth0)'
lnetctl lnet configure --all >/dev/null
modprobe lustre
for m in mgs mdt ofd osd_zfs lod osp mdd; do modprobe "$m"; done
# loop devices for the file-backed targets (mkfs.lustre and mount.lustre set them up for
# ldiskfs images; no udev here: the module's own nodes, 16 of them, are made at load)
modprobe loop max_loop=16
[ "$osd" = ldiskfs ] && modprobe osd_ldiskfs
nid=$(lctl list_nids | head -1)
say "LNet up: $nid"

mkdir -p /data "$mnt"
rm -f /etc/zfs/zpool.cache
mkfs.lustre --mgs --mdt --fsname=$fsname --index=0 --backfstype=zfs --device-size=1048576 \
    lustre-mdt0/mdt0 /data/mdt0.img >/dev/null
# A second MDT (DNE) on the same MDS: MDT0001, on ZFS as MDT0 (Debian's e2fsprogs lacks the
# dirdata feature an ldiskfs MDT needs).
for j in $(seq 1 $((nmdt - 1))); do
    mkfs.lustre --mdt --fsname=$fsname --index="$j" --mgsnode="$nid" --backfstype=zfs \
        --device-size=1048576 "lustre-mdt$j/mdt$j" "/data/mdt$j.img" >/dev/null
done
# One OST (OST1, or LUSTRE_VM_SLOW_OST's) always has its vdev behind dm-delay, at 0 ms
# unless LUSTRE_VM_SLOW_OST slows it once Lustre is up: the tier's slow-OST test slows it
# itself (tests/lustre/test_slow_ost_placement.py) and restores it after.
slow_index=1 slow_ms=0
if [ -n "${LUSTRE_VM_SLOW_OST:-}" ]; then
    slow_index=${LUSTRE_VM_SLOW_OST%%:*}
    slow_ms=${LUSTRE_VM_SLOW_OST#*:}
fi
for i in $(seq 0 $((nost - 1))); do
    dev=/data/ost$i.img
    if [ "$i" = "$slow_index" ]; then
        # this OST behind device-mapper's delay target, 0 ms while it is formatted and
        # mounted, slow_ms once everything is up. ZFS: its vdev file on an ext4 over the
        # delayed device (a file vdev: ZFS would partition a whole disk and wait for udev,
        # which this guest does not run), the ext4 mounted sync only while slowed so that
        # each vdev write meets the delay. ldiskfs: the 2 GiB OST is the delayed device.
        if [ "$osd" = ldiskfs ]; then truncate -s 2G /data/slow.img; else truncate -s 3G /data/slow.img; fi
        loop=$(losetup --find --show /data/slow.img)
        modprobe dm_delay
        slow_table="0 $(blockdev --getsz "$loop") delay $loop 0"
        # no udev here: dmsetup must not wait for it, and makes the node itself
        dmsetup create --noudevsync "slow-ost$i" --table "$slow_table 0"
        dmsetup mknodes "slow-ost$i"
        if [ "$osd" = ldiskfs ]; then
            # ldiskfs: the OST is the delayed device itself (every block I/O it submits
            # meets the delay; brw_stats times those I/Os)
            dev=/dev/mapper/slow-ost$i
        else
            mkfs.ext4 -q "/dev/mapper/slow-ost$i"
            mkdir -p /data/slow
            if [ "$slow_ms" != 0 ]; then
                mount -o sync "/dev/mapper/slow-ost$i" /data/slow
            else
                mount "/dev/mapper/slow-ost$i" /data/slow
            fi
            dev=/data/slow/ost$i.img
        fi
    fi
    if [ "$osd" = ldiskfs ]; then
        # a 2 GiB image on a loop device of its own (mount.lustre wants a block device; the
        # same device serves a remount)
        if [ ! -b "$dev" ]; then
            truncate -s 2G "$dev"
            dev=$(losetup --find --show "$dev")
        fi
        mkfs.lustre --ost --fsname=$fsname --index="$i" --mgsnode="$nid" --backfstype=ldiskfs \
            "$dev" >/dev/null
        ost_dev[$i]=$dev
    else
        mkfs.lustre --ost --fsname=$fsname --index="$i" --mgsnode="$nid" --backfstype=zfs \
            --device-size=2097152 "lustre-ost$i/ost$i" "$dev" >/dev/null
        ost_dev[$i]=lustre-ost$i/ost$i
    fi
done
for j in $(seq 0 $((nmdt - 1))); do
    mkdir -p "/lustre/mdt$j"; mount -t lustre "lustre-mdt$j/mdt$j" "/lustre/mdt$j"
done
for i in $(seq 0 $((nost - 1))); do
    mkdir -p "/lustre/ost$i"; mount -t lustre "${ost_dev[$i]}" "/lustre/ost$i"
done
mount -t lustre "$nid:/$fsname" "$mnt"
# Ready when every OSP on the MDT has precreated objects (prealloc_status 0).
for _ in $(seq 1 600); do
    bad=$(lctl get_param -n osp.*.prealloc_status 2>/dev/null | grep -vc '^0$' || true)
    n=$(lctl get_param -n osp.*.prealloc_status 2>/dev/null | wc -l)
    [ "$n" -ge $((nost * nmdt)) ] && [ "$bad" = 0 ] && break
    sleep 0.5
done
say "Lustre $(lctl get_param -n version 2>/dev/null | head -1) mounted at $mnt ($osd OSTs, $nmdt MDTs, $n OSPs ready)"
if [ "$slow_ms" != 0 ]; then
    dmsetup suspend --noudevsync "slow-ost$slow_index"
    dmsetup load --noudevsync "slow-ost$slow_index" --table "$slow_table $slow_ms"
    dmsetup resume --noudevsync "slow-ost$slow_index"
    say "OST$slow_index: every I/O of its vdev delayed ${slow_ms} ms"
fi

export LUSTRE_VM_DELAYED_OST="$slow_index:slow-ost$slow_index:$slow_table"
export LUSTRE_VM_OSD=$osd LUSTRE_VM_MDTS=$nmdt LUSTRE_VM_OST_DEVS="${ost_dev[*]}"
export LUSTRE_VM=1 LUSTRE_MOUNT=$mnt LUSTRE_FSNAME=$fsname LUSTRE_NID=$nid OUT=/out
export PYTHONPATH=/src PYTHONDONTWRITEBYTECODE=1
mapfile -d '' cmd </out/cmd
say "running: ${cmd[*]}"
cd /tmp
set +e
"${cmd[@]}"
rc=$?
set -e
say "command status $rc"
umount "$mnt" || true
for i in $(seq 0 $((nost - 1))); do umount "/lustre/ost$i" || true; done
for j in $(seq $((nmdt - 1)) -1 0); do umount "/lustre/mdt$j" || true; done
exit $rc
