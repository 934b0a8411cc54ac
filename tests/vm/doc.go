// Package vm is the VM boot lab (make test-vm, docs/vmlab.md): the agent as
// the systemd service of a booted Debian 12 guest under QEMU, with a swtpm
// vTPM, an elemental-like layout (/oem on its own disk, ephemeral /etc, the
// initramfs stage run by the real yip engine, elemental.mode= sentinels), and
// regserver in a network namespace of the test's own on a segment without
// DHCP. The cases live behind the build tag vmlab: they need root, QEMU,
// swtpm and mmdebstrap, and take minutes.
package vm
