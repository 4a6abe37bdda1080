#!/usr/bin/env bash
# A single-node Lustre 2.17 (ZFS OSDs) in a QEMU guest: the project's real-Lustre tier.
#
#   bash scripts/lustre-vm.sh build  [--lustre-src DIR] [--ref REF]   build and cache the guest
#   bash scripts/lustre-vm.sh run    [--lustre-src DIR] -- CMD ...    boot, format, mount, run CMD, stop
#   bash scripts/lustre-vm.sh test   [--lustre-src DIR]               run the real-Lustre tier
#
# DIR is a lustre-release git tree (a work tree or a bare mirror); REF defaults to v2_17_0.
# Everything built goes to $LUSTRE_VM_CACHE (default ~/.cache/lustre-alloc-vm), keyed by its
# inputs; nothing built lands in the checkout. Needs root (debootstrap, chroot) and the
# network to Debian's mirror and PyPI on the first build. docs/lustre-vm.md says more.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/lustre-vm/main.sh" "$@"
