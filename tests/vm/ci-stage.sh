#!/bin/sh
# The VM boot lab's CI stage (docs/vmlab.md): .ci/run calls it as root on a
# fresh Debian 12 machine. It installs the lab's Debian packages when they are
# missing, then runs make test-vm; a package that cannot be had fails the
# stage in one line (make test-vm itself never skips silently).
set -eu
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
# QEMU (TCG) with its firmware, qemu-img for the overlays, mmdebstrap for the
# image, swtpm for the vTPM, ping for the host-side checks, dnsmasq's binary
# for B7's DHCP server (inside the lab's namespace; no service on the host).
pkgs="qemu-system-x86 qemu-utils mmdebstrap ipxe-qemu seabios swtpm swtpm-tools iputils-ping e2fsprogs dnsmasq-base"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; then
		echo "vmlab: cannot run the VM lab: apt-get could not install$missing"
		exit 1
	fi
fi
# B8's power cuts: one point per /etc mode here (docs/vmlab.md); make
# test-vm VM_CASES=B8 runs them all. Keeps the stage near 20 minutes.
export VMLAB_B8_POINTS="${VMLAB_B8_POINTS:-keyfiles:kept oem:ephemeral}"
exec make --no-print-directory test-vm
