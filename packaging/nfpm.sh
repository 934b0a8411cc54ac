#!/bin/sh
# make install-list | nfpm.sh ROOT VERSION: prints the nfpm config of
# nodereg's .deb and .rpm (make package). ROOT is a `make install
# DESTDIR=ROOT` tree; the packages hold exactly the files and links of the
# list on stdin (`make install-list`), each with the mode install gave it,
# so a package and make install cannot drift apart (tests/package checks
# both packages against the list, and installs the .deb over upstream's).
#
# PACKAGE_MAINTAINER names who answers for the packages: the project by
# default; whoever rebuilds them for a distribution sets their own.
set -eu
root=$1 version=$2
: "${PACKAGE_MAINTAINER:=nodereg project <nodereg@users.noreply.github.com>}"
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
maintainer: "$PACKAGE_MAINTAINER"
vendor: nodereg project
homepage: https://github.com/nodereg/nodereg
license: Apache-2.0
# The first line is the RPM Summary and the Debian synopsis: one whole
# sentence, short enough for both.
description: |
  Elemental node registration agent, a drop-in for elemental-register
  nodereg-agent registers an image-based node with elemental-operator (or
  nodereg's reference server) over the registration websocket, proving its
  identity with the TPM, and sends the hardware inventory. It writes the
  network config with the addresses the IPAM pool gave through yip stages
  and NetworkManager, so they hold across reboots without DHCP, and can
  bring up a bootstrap network of its own where there is none.
# Upstream's client owns /usr/sbin/elemental-register, which this package
# installs as a link to nodereg-agent: the two cannot be installed
# together, and this one takes upstream's place (Debian: Provides,
# Conflicts and Replaces; RPM: Provides, Conflicts and Obsoletes).
provides:
- elemental-register
conflicts:
- elemental-register
replaces:
- elemental-register
contents:
YAML
echo "$list" | while read -r p; do
	f="$root$p"
	if [ -L "$f" ]; then
		printf -- '- src: "%s"\n  dst: "%s"\n  type: symlink\n' "$(readlink "$f")" "$p"
	elif [ -f "$f" ]; then
		mode=$(stat -c %a "$f")
		case $p in
		# The RPM marks docs (%doc) and the licence (%license); nfpm
		# leaves such entries out of the .deb, which gets them as plain
		# files under the same path.
		/usr/share/doc/*)
			kind=doc
			[ "${p##*/}" = LICENSE ] && kind=license
			printf -- '- src: "%s"\n  dst: "%s"\n  packager: deb\n  file_info:\n    mode: 0%s\n' "$f" "$p" "$mode"
			printf -- '- src: "%s"\n  dst: "%s"\n  packager: rpm\n  type: %s\n  file_info:\n    mode: 0%s\n' "$f" "$p" "$kind" "$mode"
			;;
		*)
			printf -- '- src: "%s"\n  dst: "%s"\n  file_info:\n    mode: 0%s\n' "$f" "$p" "$mode"
			;;
		esac
	else
		echo "nfpm.sh: $f is not in the install tree" >&2
		exit 1
	fi
done
