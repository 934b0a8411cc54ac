#!/bin/sh
# build.sh OUT: the VM lab's guest image (docs/vmlab.md).
#   OUT/debian-<key>.tar   Debian 12 from the host's apt mirror (mmdebstrap), cached by key
#   OUT/base.img           raw ext4 root: that tree + the agent (its .deb, dpkg --root) + the lab's units
#   OUT/vmlinuz, initrd.img the guest's kernel and initramfs, for direct kernel boot
# Run from the repository root, as root, with OUT/yiprun built (the Go
# test copies it there from the shared test build); make package-build
# below builds the agent the image installs.
set -eu
out=$(realpath "$1")
here=$(realpath "$(dirname "$0")")
mkdir -p "$out"

pkgs=systemd,systemd-sysv,udev,dbus,network-manager,iproute2,kmod,procps,iputils-ping,linux-image-amd64,initramfs-tools,zstd,qemu-guest-agent,tpm2-tools,e2fsprogs
# The cached tree depends on the package list and the initramfs pieces only.
key=$( (echo "$pkgs"; find "$here/initramfs-tools" -type f | sort | xargs cat) | sha256sum | cut -c1-16)
base="$out/debian-$key.tar"
if [ ! -s "$base" ]; then
	echo "vmlab: image: mmdebstrap bookworm from /etc/apt/sources.list.d/debian.sources (cache $base)"
	rm -f "$out"/debian-*.tar "$out"/debian-*.tar.part
	# initramfs-tools' config goes in before the kernel is installed, so the
	# kernel's postinst builds the small initramfs once.
	mmdebstrap --variant=apt --mode=root --format=tar --include="$pkgs" \
		--setup-hook='mkdir -p "$1/etc/initramfs-tools"' \
		--setup-hook="sync-in $here/initramfs-tools /etc/initramfs-tools" \
		bookworm "$base.part" /etc/apt/sources.list.d/debian.sources
	mv "$base.part" "$base"
fi

root="$out/rootfs"
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$base"

# The agent, as an installed system gets it: nodereg's .deb (make package-build,
# docs/install.md, "Packages"), installed with dpkg into the image root.
make --no-print-directory package-build >"$out/make-package.log" 2>&1 || { cat "$out/make-package.log" >&2; exit 1; }
dpkg --root="$root" -i bin/pkg/nodereg_*.deb >"$out/dpkg.log" 2>&1 || { cat "$out/dpkg.log" >&2; exit 1; }
install -D -m 0755 "$out/yiprun" "$root/usr/libexec/vmlab/yiprun"
install -m 0755 "$here/probe" "$root/usr/libexec/vmlab/probe"
for u in "$here"/systemd/*.service; do
	install -m 0644 "$u" "$root/etc/systemd/system/"
done
systemctl --root="$root" enable nodereg.service nodereg-update.timer \
	elemental-setup-initramfs.service addrwatch.service
# No DHCP anywhere: the image keeps NetworkManager's defaults (it tries DHCP
# on every NIC, as an image meant for DHCP networks does).

cat >"$root/etc/fstab" <<'FSTAB'
/dev/vda / ext4 rw,errors=remount-ro 0 1
LABEL=OEM /oem ext4 defaults 0 2
FSTAB
mkdir -p "$root/oem" "$root/etc/NetworkManager/system-connections"
echo nodereg-vm >"$root/etc/hostname"
# A fixed machine id: the ephemeral /etc would otherwise make every boot a
# "first boot" (presets re-applied).
echo 5a1b2c3d4e5f60718293a4b5c6d7e8f9 >"$root/etc/machine-id"
cat >"$root/etc/default/nodereg" <<'ARGS'
# VM lab: bounds that fit a lab run (the defaults are 10m each).
NODEREG_ARGS="--deadline 90s --network-timeout 120s"
ARGS
mkdir -p "$root/etc/systemd/system/serial-getty@ttyS0.service.d"
cat >"$root/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'GETTY'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200 %I $TERM
GETTY
if [ -e "$root/usr/bin/nmstatectl" ] || [ -e "$root/usr/sbin/nmstatectl" ]; then
	echo "vmlab: image: nmstatectl found in the image; the lab proves the built-in translator" >&2
	exit 1
fi
cp -L "$root/vmlinuz" "$out/vmlinuz" 2>/dev/null || cp "$(ls "$root"/boot/vmlinuz-* | tail -1)" "$out/vmlinuz"
cp -L "$root/initrd.img" "$out/initrd.img" 2>/dev/null || cp "$(ls "$root"/boot/initrd.img-* | tail -1)" "$out/initrd.img"
rm -f "$out/base.img"
mkfs.ext4 -q -F -L root -d "$root" "$out/base.img" 2G
rm -rf "$root"
echo "vmlab: image: $out/base.img ($(du -m "$out/base.img" | cut -f1) MB used), kernel $(du -k "$out/vmlinuz" | cut -f1) KB, initramfs $(du -k "$out/initrd.img" | cut -f1) KB"
