#!/bin/sh
# make install-list | nfpm.sh ROOT VERSION: prints the nfpm config of
# nodereg's .deb and .rpm (make package). ROOT is a `make install
# DESTDIR=ROOT` tree; the packages hold exactly the files and links of the
# list on stdin (`make install-list`), each with
# the mode install gave it, so a package and make install cannot drift
# apart (tests/package checks both packages against the list).
set -eu
root=$1 version=$2
list=$(cat)
[ -n "$list" ] || { echo "nfpm.sh: no file list on stdin" >&2; exit 1; }

cat <<YAML
name: nodereg
arch: amd64
platform: linux
version: "$version"
version_schema: semver
section: admin
priority: optional
maintainer: "nodereg developers <nodereg@localhost>"
description: |
  On-node registration agent for Elemental-style image-based fleets: TPM
  identity, registration with elemental-operator, hardware inventory, and
  the IPAM network config written through yip stages and NetworkManager.
license: Apache-2.0
# upstream's client owns /usr/sbin/elemental-register, our compatibility
# link: the two cannot be installed together.
conflicts:
- elemental-register
contents:
YAML
echo "$list" | while read -r p; do
	f="$root$p"
	if [ -L "$f" ]; then
		printf -- '- src: "%s"\n  dst: "%s"\n  type: symlink\n' "$(readlink "$f")" "$p"
	elif [ -f "$f" ]; then
		printf -- '- src: "%s"\n  dst: "%s"\n  file_info:\n    mode: 0%s\n' "$f" "$p" "$(stat -c %a "$f")"
	else
		echo "nfpm.sh: $f is not in the install tree" >&2
		exit 1
	fi
done
