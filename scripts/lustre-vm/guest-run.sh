#!/usr/bin/env bash
# Runs inside the guest (from guest-init): brings up a single-node Lustre on ZFS over files
# (MGS+MDT, four OSTs, a client at /mnt/lustre), then the command the host gave in /out/cmd.
# Steps from lustre-vm-notes (docs/lustre-vm.md): LNet on eth0, mkfs.lustre --backfstype=zfs
# over sparse files, mount the targets, the client, and wait until every OSP has precreated.
set -euo pipefail
export PATH=/opt/lustre-alloc-venv/bin:/usr/sbin:/usr/bin:/sbin:/bin
fsname=lustre
mnt=/mnt/lustre
nost=${LUSTRE_VM_OSTS:-4}
t0=$(date +%s)
say() { echo "guest: [$(( $(date +%s) - t0 )) s] $*"; }

say "kernel $(uname -r), $(nproc) CPUs; network: $(ls /sys/class/net | tr "\n" " ")"
# shellcheck disable=SC1091
[ -f /out/settings ] && . /out/settings
if [ -n "${LUSTRE_VM_ZFS_DIRTY_MAX:-}" ]; then
    modprobe zfs zfs_dirty_data_max="$LUSTRE_VM_ZFS_DIRTY_MAX"
else
    modprobe zfs
fi
modprobe lnet networks='tcp0(eth0)'
lnetctl lnet configure --all >/dev/null
modprobe lustre
for m in mgs mdt ofd osd_zfs lod osp mdd; do modprobe "$m"; done
nid=$(lctl list_nids | head -1)
say "LNet up: $nid"

mkdir -p /data "$mnt"
rm -f /etc/zfs/zpool.cache
mkfs.lustre --mgs --mdt --fsname=$fsname --index=0 --backfstype=zfs --device-size=1048576 \
    lustre-mdt0/mdt0 /data/mdt0.img >/dev/null
slow_index=${LUSTRE_VM_SLOW_OST%%:*}
slow_ms=${LUSTRE_VM_SLOW_OST#*:}
for i in $(seq 0 $((nost - 1))); do
    dev=/data/ost$i.img
    if [ -n "${LUSTRE_VM_SLOW_OST:-}" ] && [ "$i" = "$slow_index" ]; then
        # every read and write of this OST's vdev waits slow_ms (device-mapper's delay target)
        truncate -s 2G "$dev"
        modprobe loop
        loop=$(losetup --find --show "$dev")
        modprobe dm_delay
        dmsetup create "slow-ost$i" --table "0 $(blockdev --getsz "$loop") delay $loop 0 $slow_ms"
        dev=/dev/mapper/slow-ost$i
        say "OST$i on $dev: ${slow_ms} ms per I/O"
    fi
    mkfs.lustre --ost --fsname=$fsname --index="$i" --mgsnode="$nid" --backfstype=zfs \
        --device-size=2097152 "lustre-ost$i/ost$i" "$dev" >/dev/null
done
mkdir -p /lustre/mdt0; mount -t lustre lustre-mdt0/mdt0 /lustre/mdt0
for i in $(seq 0 $((nost - 1))); do
    mkdir -p "/lustre/ost$i"; mount -t lustre "lustre-ost$i/ost$i" "/lustre/ost$i"
done
mount -t lustre "$nid:/$fsname" "$mnt"
# Ready when every OSP on the MDT has precreated objects (prealloc_status 0).
for _ in $(seq 1 600); do
    bad=$(lctl get_param -n osp.*.prealloc_status 2>/dev/null | grep -vc '^0$' || true)
    n=$(lctl get_param -n osp.*.prealloc_status 2>/dev/null | wc -l)
    [ "$n" -ge "$nost" ] && [ "$bad" = 0 ] && break
    sleep 0.5
done
say "Lustre $(lctl get_param -n version 2>/dev/null | head -1) mounted at $mnt ($n OSTs ready)"

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
umount /lustre/mdt0 || true
exit $rc
