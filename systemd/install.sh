#!/bin/sh
# install.sh: what `make install` does (systemd/install.mk passes its
# variables in the environment). Every target is checked before any is
# written: a refusal writes nothing, and the files are written under
# temporary names first, renamed into place only when all of them are
# there. `install.sh --list` prints the files an install writes (relative
# to DESTDIR), the list the packages are checked against.
#
# With upstream's elemental-register present (an Elemental image), it
# refuses unless ELEMENTAL_REGISTER=replace: then upstream's binary is kept
# as elemental-register.upstream, the compatibility links take its names,
# upstream's units are masked in the admin's unit directory, and nodereg's
# units are enabled (docs/rancher.md, "Installing into an Elemental image").
set -eu

: "${DESTDIR=}"
# Run alone from a checkout, the defaults are install.mk's.
here=$(cd "$(dirname "$0")" && pwd)
: "${PREFIX:=/usr}" "${NODEREG_AGENT:=$PREFIX/sbin/nodereg-agent}" "${SYSTEMD_UNITDIR:=$PREFIX/lib/systemd/system}"
: "${AGENT_BIN:=$here/../bin/nodereg-agent}" "${UNIT_SRC:=$here}" "${COMPAT_LINKS:=yes}" "${ELEMENTAL_REGISTER:=no}"
: "${SYSTEMD_ENABLE:=no}" "${ADMIN_UNITDIR:=/etc/systemd/system}" "${SYSTEMCTL:=systemctl}"
: "${MANDIR:=$PREFIX/share/man}" "${DOC_ROOT:=$here/..}" "${DOCDIR:=$PREFIX/share/doc/nodereg}"
if [ -z "${MAN_SRC+set}" ] && [ -d "$here/../bin/man" ]; then MAN_SRC=$here/../bin/man; fi
: "${MAN_SRC:=}"
if [ -z "${DOC_FILES+set}" ]; then
	DOC_FILES=$(cd "$DOC_ROOT" && ls README.md LICENSE docs/*.md 2>/dev/null || true)
fi
# The units, and the binary path they name as shipped (rewritten to
# NODEREG_AGENT on install).
NODEREG_UNITS="nodereg.service nodereg-update.service nodereg-update.timer nodereg-reset.service nodereg-install.service nodereg-verify.service"
DEFAULT_AGENT=/usr/sbin/nodereg-agent

# upstream's names: the binary its RPM ships, the units Elemental images
# carry (rancher/elemental framework/files/usr/lib/systemd/system).
UPSTREAM_UNITS="elemental-register.service elemental-register.timer elemental-register-install.service elemental-register-reset.service"
sbindir=$(dirname "$NODEREG_AGENT")
agent_name=$(basename "$NODEREG_AGENT")
upstream_bin="$sbindir/elemental-register"
reset_alias="elemental-register-reset.service"

die() { echo "install: $*" >&2; exit 1; }

case "$ELEMENTAL_REGISTER" in
no | replace) ;;
*) die "ELEMENTAL_REGISTER=$ELEMENTAL_REGISTER: want no or replace" ;;
esac

# plan prints one line per target: KIND TARGET ARG [MODE] (paths without
# DESTDIR).
#   file T SRC MODE   a copy (units: ExecStart= rewritten to NODEREG_AGENT)
#   link T TO         a symlink T -> TO
#   mask T            a symlink T -> /dev/null
#   aside T           upstream's T kept as T.upstream
plan() {
	echo "file $NODEREG_AGENT $AGENT_BIN 0755"
	for u in $NODEREG_UNITS; do echo "file $SYSTEMD_UNITDIR/$u $UNIT_SRC/$u 0644"; done
	if [ -n "$MAN_SRC" ]; then
		for m in "$MAN_SRC"/*.8; do [ -f "$m" ] && echo "file $MANDIR/man8/$(basename "$m") $m 0644"; done
	fi
	for d in $DOC_FILES; do echo "file $DOCDIR/$d $DOC_ROOT/$d 0644"; done
	[ "$COMPAT_LINKS" = yes ] || return 0
	replace=no
	if [ "$ELEMENTAL_REGISTER" = replace ] && upstream_present; then replace=yes; fi
	[ $replace = no ] || echo "aside $upstream_bin"
	echo "link $upstream_bin $agent_name"
	# Over upstream's own reset unit the override in the admin's directory
	# (below) is the alias; upstream's file stays as it is.
	if [ "$ELEMENTAL_REGISTER" = no ] || ! foreign "$SYSTEMD_UNITDIR/$reset_alias" nodereg-reset.service; then
		echo "link $SYSTEMD_UNITDIR/$reset_alias nodereg-reset.service"
	fi
	[ "$ELEMENTAL_REGISTER" = replace ] || return 0
	for u in $UPSTREAM_UNITS; do
		# The reset alias keeps the operator's reset plan working
		# (systemctl start elemental-register-reset): it overrides
		# upstream's unit instead of masking it.
		if [ "$u" = "$reset_alias" ]; then
			echo "link $ADMIN_UNITDIR/$u $SYSTEMD_UNITDIR/nodereg-reset.service"
		else
			echo "mask $ADMIN_UNITDIR/$u"
		fi
	done
}

# foreign: host path $1 exists (under DESTDIR) and is not a link to $2.
foreign() {
	[ -e "$DESTDIR$1" ] || [ -L "$DESTDIR$1" ] || return 1
	! { [ -L "$DESTDIR$1" ] && [ "$(readlink "$DESTDIR$1")" = "$2" ]; }
}

# upstream_present: the upstream binary is there and is not our link.
upstream_present() { foreign "$upstream_bin" "$agent_name"; }

# writable_parent: the nearest existing ancestor of $1 is a writable
# directory (the directories below it are made).
writable_parent() {
	up=$(dirname "$1")
	while [ ! -e "$up" ] && [ ! -L "$up" ]; do up=$(dirname "$up"); done
	[ -d "$up" ] && [ -w "$up" ]
}

# inside_destdir: no directory on the way to host path $1 under DESTDIR is
# a symlink, and $1 holds no "..": a tree the build did not make (an image
# a user can write to) cannot send a write, a rename or a chmod outside
# DESTDIR. Every existing component is checked, from DESTDIR down; the
# ones that do not exist yet are made by mkdir -p, as directories. Without
# DESTDIR the system's own layout is taken as it is (/usr/sbin may be a
# link to bin on a merged-/usr system).
inside_destdir() {
	case "/$1/" in */../*) die "$1: a target path may not hold '..': nothing written" ;; esac
	[ -n "$DESTDIR" ] || return 0
	p=$DESTDIR
	set -f
	old_ifs=$IFS
	IFS=/
	# shellcheck disable=SC2046 # split on / on purpose
	set -- $(dirname "$1")
	IFS=$old_ifs
	set +f
	for c; do
		[ -n "$c" ] || continue
		p="$p/$c"
		if [ -L "$p" ]; then
			die "$p is a symlink (to $(readlink "$p")): what is installed under it could land outside $DESTDIR; nothing written"
		fi
		[ -e "$p" ] || break
	done
}

# check_one KIND T ARG: refuses (dies) when T cannot be written as planned.
check_one() {
	d="$DESTDIR$2"
	inside_destdir "$2"
	case "$1" in
	file | link | mask)
		# The staging name is written through (cp, sed, chmod follow a
		# link): one already there may point anywhere.
		if [ -e "$d.nodereg-new" ] || [ -L "$d.nodereg-new" ]; then
			die "$d.nodereg-new exists already (left by an interrupted install, or planted): remove it and run again; nothing written"
		fi ;;
	esac
	case "$1" in
	link | mask)
		if [ -d "$d" ] && [ ! -L "$d" ]; then die "$d is a directory: nothing written"; fi ;;
	esac
	case "$1" in
	file)
		[ -f "$3" ] || die "$3 not found: nothing written"
		[ ! -d "$d" ] || die "$d is a directory: nothing written"
		[ ! -L "$d" ] || die "$d is a symlink, not a file of ours: nothing written" ;;
	link)
		# upstream's binary is set aside first (an aside line precedes).
		if foreign "$2" "$3" && ! { [ "$2" = "$upstream_bin" ] && [ "$ELEMENTAL_REGISTER" = replace ]; }; then
			die "refusing to replace $d, not ours (COMPAT_LINKS=no skips the compatibility links): nothing written"
		fi ;;
	mask)
		if foreign "$2" /dev/null; then die "refusing to mask $d: a file of the admin's is there: nothing written"; fi ;;
	aside)
		{ [ -f "$d" ] && [ ! -L "$d" ]; } || die "$d is not a regular file: nothing written"
		if [ -e "$d.upstream" ] || [ -L "$d.upstream" ]; then die "$d.upstream exists already: nothing written"; fi ;;
	esac
	writable_parent "$d" || die "cannot write $d (its directory is not a writable directory): nothing written"
}

check() {
	[ -f "$AGENT_BIN" ] || die "$AGENT_BIN not found: build it first (make ${NODEREG_BUILD_TARGET:-build})"
	if [ "$COMPAT_LINKS" = yes ] && [ "$ELEMENTAL_REGISTER" = no ] && upstream_present; then
		die "upstream's elemental-register is installed ($DESTDIR$upstream_bin): nothing written. ELEMENTAL_REGISTER=replace takes over (upstream's binary kept as elemental-register.upstream, its units masked, nodereg's enabled); COMPAT_LINKS=no installs beside it, and both agents may then run"
	fi
	if [ "$ELEMENTAL_REGISTER" = replace ] || [ "$SYSTEMD_ENABLE" = yes ]; then
		command -v "$SYSTEMCTL" >/dev/null 2>&1 || die "$SYSTEMCTL not found: enabling the units needs systemctl --root; nothing written"
	fi
	while read -r kind t arg mode; do [ -z "$kind" ] || check_one "$kind" "$t" "$arg"; done <<EOF
$1
EOF
	# systemctl --root enable writes links into the admin's unit
	# directory, under each WantedBy= target's .wants: no link on the way.
	if [ "$ELEMENTAL_REGISTER" = replace ] || [ "$SYSTEMD_ENABLE" = yes ]; then
		for f in $NODEREG_UNITS; do
			for w in $(sed -n 's/^WantedBy=//p' "$UNIT_SRC/$f"); do
				inside_destdir "$ADMIN_UNITDIR/$w.wants/$f"
			done
		done
	fi
}

# stage writes each new file and link beside its target (T.nodereg-new);
# commit renames them into place. A failure while staging removes what
# was staged.
staged=""
cleanup() { for s in $staged; do rm -f "$s"; done; }
stage() {
	trap cleanup EXIT
	while read -r kind t arg mode; do
		case "$kind" in "" | aside) continue ;; esac
		d="$DESTDIR$t"
		mkdir -p "$(dirname "$d")"
		n="$d.nodereg-new"
		# Each staging name is made new (noclobber, ln without -f): one
		# that appeared since the check (a link planted meanwhile) fails
		# the install, is neither written through nor removed as ours.
		case "$kind" in
		file)
			set -C
			: >"$n"
			set +C
			staged="$staged $n"
			case "$t" in
			"$SYSTEMD_UNITDIR"/*) sed "s|$DEFAULT_AGENT|$NODEREG_AGENT|g" "$arg" >"$n" ;;
			*) cat "$arg" >"$n" ;;
			esac
			chmod "$mode" "$n" ;;
		link | mask)
			to=$arg
			[ "$kind" = link ] || to=/dev/null
			ln -sn "$to" "$n"
			staged="$staged $n" ;;
		esac
	done <<EOF
$1
EOF
	trap - EXIT
}

commit() {
	while read -r kind t arg mode; do
		d="$DESTDIR$t"
		case "$kind" in
		"") ;;
		aside) mv -f "$d" "$d.upstream"; echo "kept upstream's $d as $d.upstream" ;;
		mask) mv -f "$d.nodereg-new" "$d"; echo "masked $d" ;;
		*) mv -f "$d.nodereg-new" "$d"; echo "installed $d" ;;
		esac
	done <<EOF
$1
EOF
}

# enable: the units with an [Install] section, with systemctl --root.
enable() {
	[ "$ELEMENTAL_REGISTER" = replace ] || [ "$SYSTEMD_ENABLE" = yes ] || return 0
	u=""
	for f in $NODEREG_UNITS; do grep -q '^\[Install\]' "$UNIT_SRC/$f" && u="$u $f"; done
	# shellcheck disable=SC2086 # one word per unit
	"$SYSTEMCTL" --root="${DESTDIR:-/}" enable $u
}

steps=$(plan)
if [ "${1:-}" = --list ]; then
	echo "$steps" | while read -r kind t arg mode; do
		case "$kind" in file | link) echo "$t" ;; esac
	done
	exit 0
fi
check "$steps"
stage "$steps"
commit "$steps"
enable
