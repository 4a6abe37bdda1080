#!/usr/bin/env bash
# Boots the cached guest once (called by main.sh; environment: vmdir checkout cache
# timeout_s): a throw-away qcow2 overlay over the image, the checkout shared read-only at
# /src, a run folder shared at /out. The guest formats and mounts Lustre
# (guest-run.sh), runs the command given here, and powers off; this script prints the guest's
# log and exits with the command's status (124 on timeout, 3 when the guest gave none).
set -euo pipefail
: "${vmdir:?}" "${checkout:?}" "${cache:?}" "${timeout_s:?}"
[ $# -ge 1 ] || { echo "lustre-vm run: no command" >&2; exit 2; }

runs=${LUSTRE_VM_RUNS:-$cache/../runs}
mkdir -p "$runs"
run=$(mktemp -d "$runs/$(date -u +%Y%m%dT%H%M%S)-XXXX")
mkdir -p "$run/out"
# The command, one argument per line (NUL-free), for guest-run.sh.
printf '%s\0' "$@" >"$run/out/cmd"
# Settings of the file system the guest formats (guest-run.sh): the OSTs' OSD and the MDT
# count (main.sh --osd, --mdts), one OST on a dm-delay
# device ("INDEX:MS"), ZFS's dirty-data limit in bytes (a small one makes a slow vdev throttle
# its writers at once instead of after gigabytes).
{
    echo "LUSTRE_VM_SLOW_OST=${LUSTRE_VM_SLOW_OST:-}"
    echo "LUSTRE_VM_ZFS_DIRTY_MAX=${LUSTRE_VM_ZFS_DIRTY_MAX:-}"
    echo "LUSTRE_VM_OSD=${LUSTRE_VM_OSD:-zfs}"
    echo "LUSTRE_VM_MDTS=${LUSTRE_VM_MDTS:-1}"
} >"$run/out/settings"
qemu-img create -q -f qcow2 -b "$cache/root.img" -F raw "$run/overlay.qcow2"

# KVM only where it is real hardware virtualization: this machine kind's /dev/kvm is a
# paravirtual one (kvm_pvm) that boots no stock kernel (docs/lustre-vm.md).
accel=tcg,thread=multi
if [ "${LUSTRE_VM_ACCEL:-auto}" = kvm ] || { [ "${LUSTRE_VM_ACCEL:-auto}" = auto ] && [ -w /dev/kvm ] \
        && grep -qE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; }; then
    accel=kvm
fi
mem=${LUSTRE_VM_MEM_MB:-6144}
smp=${LUSTRE_VM_SMP:-2}
echo "lustre-vm run: $run (accel $accel, ${mem} MiB, $smp CPUs)" >&2
t0=$(date +%s)
set +e
timeout --foreground "$timeout_s" qemu-system-x86_64 -accel "$accel" -cpu max -m "$mem" -smp "$smp" \
    -nographic -no-reboot \
    -kernel "$cache/vmlinuz" -initrd "$cache/initrd" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 tsc=reliable quiet init=/sbin/lustre-vm-init" \
    -drive "file=$run/overlay.qcow2,format=qcow2,if=virtio,cache=unsafe" \
    -virtfs "local,path=$checkout,mount_tag=src,security_model=none,readonly=on" \
    -virtfs "local,path=$run/out,mount_tag=out,security_model=none" \
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
    >"$run/console.log" 2>&1
qrc=$?
set -e
rm -f "$run/overlay.qcow2"
echo "lustre-vm run: guest stopped after $(( $(date +%s) - t0 )) s (qemu status $qrc)" >&2
[ -f "$run/out/guest.log" ] && cat "$run/out/guest.log"
if [ $qrc = 124 ]; then
    echo "lustre-vm run: timed out after $timeout_s s; console: $run/console.log" >&2
    exit 124
fi
if [ ! -f "$run/out/rc" ]; then
    echo "lustre-vm run: the guest gave no status; console: $run/console.log" >&2
    tail -30 "$run/console.log" >&2
    exit 3
fi
echo "lustre-vm run: results in $run/out" >&2
exit "$(cat "$run/out/rc")"
