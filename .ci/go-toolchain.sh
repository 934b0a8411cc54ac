#!/usr/bin/env bash
# Prints the bin directory of a Go at least as new as go.mod asks for,
# fetching that Go from the Go module proxy when the machine has none new
# enough. Debian 12's golang-go is 1.19, which predates GOTOOLCHAIN (1.21):
# it cannot switch to a newer Go by itself, so this does what a 1.21+ go
# does on its own, through the same module (golang.org/toolchain).
#
#   .ci/go-toolchain.sh          -> /path/to/go/bin (stdout); progress on stderr
#   export PATH="$(.ci/go-toolchain.sh):$PATH"
#
# Which Go: go.mod's toolchain line, else its go line; a language version
# such as "1.26" means its first release, go1.26.0, as the go command reads
# it. NODEREG_GO_VERSION (e.g. 1.26.8) overrides.
#
# How, in order:
#  1. the `go` on PATH (or $GO) when it is new enough: nothing fetched;
#  2. a Go this script unpacked before, in $NODEREG_GO_DIR;
#  3. with any older go (1.19 works): `go mod download` of
#     golang.org/toolchain@v0.0.1-go<ver>.<os>-<arch>, which checks the zip
#     against the checksum database (GOSUMDB, signed tree) like any module;
#  4. with no go at all: curl fetches the module zip from $GOPROXY (first
#     entry), its h1: hash is checked against the checksum database's record
#     fetched through the same proxy (the record only: the database's
#     signed tree is not verified in shell), and it is unpacked with unzip.
#     GOSUMDB=off skips the check, as it does for the go command.
# Anything else fails at once with one line on stderr and exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "go-toolchain: $*" >&2; exit 1; }
note() { echo "go-toolchain: $*" >&2; }

# want: the version go.mod needs, without the "go" prefix.
want=${NODEREG_GO_VERSION:-}
if [ -z "$want" ]; then
	want=$(sed -n 's/^toolchain[[:space:]]*go\([0-9][0-9.a-z]*\)[[:space:]]*$/\1/p' go.mod | head -1)
fi
if [ -z "$want" ]; then
	want=$(sed -n 's/^go[[:space:]]*\([0-9][0-9.a-z]*\)[[:space:]]*$/\1/p' go.mod | head -1)
	[ -n "$want" ] || fail "go.mod has no go line"
	case $want in
	1.[0-9]|1.[0-9][0-9]) want=$want.0 ;;
	esac
fi

# vers_ge A B: A >= B for release versions 1.N.P (a pre-release such as
# 1.27rc1 counts as 1.27.0, which is close enough to pick a toolchain).
vers_ge() {
	local a b i
	IFS=. read -r -a a <<<"$(echo "$1" | sed 's/[a-z].*//')"
	IFS=. read -r -a b <<<"$(echo "$2" | sed 's/[a-z].*//')"
	for i in 0 1 2; do
		if [ "${a[i]:-0}" -gt "${b[i]:-0}" ]; then return 0; fi
		if [ "${a[i]:-0}" -lt "${b[i]:-0}" ]; then return 1; fi
	done
	return 0
}

# goversion GO: "1.26.8" for a go binary, empty if it does not run. GOTOOLCHAIN=local:
# a 1.21+ go must report itself, not the Go it would switch to.
goversion() { GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null | sed -n 's/^go//p' || true; }

existing=${GO:-$(command -v go || true)}
have=""
if [ -n "$existing" ]; then
	have=$(goversion "$existing")
	if [ -z "$have" ]; then
		# Before 1.16 `go env GOVERSION` prints nothing: take `go version`.
		have=$("$existing" version 2>/dev/null | sed -n 's/^go version go\([0-9][0-9.a-z]*\) .*/\1/p' || true)
	fi
fi
if [ -n "$have" ] && vers_ge "$have" "$want"; then
	dirname "$(readlink -f "$existing")"
	exit 0
fi

case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
i?86) arch=386 ;;
armv6l|armv7l) arch=armv6l ;;
*) fail "no Go toolchain build for machine $(uname -m)" ;;
esac
os=$(uname -s | tr 'A-Z' 'a-z')
mod=golang.org/toolchain
ver=v0.0.1-go$want.$os-$arch

dir=${NODEREG_GO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nodereg/toolchain}
root=$dir/go$want.$os-$arch
if [ -x "$root/bin/go" ] && [ "$(goversion "$root/bin/go")" = "$want" ]; then
	echo "$root/bin"
	exit 0
fi

# install_root SRC cp|mv: SRC becomes $root, whole or not at all. Module
# zips carry no file modes: the commands get their execute bits here, as a
# 1.21+ go does when it first runs a toolchain it downloaded.
install_root() {
	mkdir -p "$dir"
	rm -rf "$root.partial"
	if [ "$2" = cp ]; then cp -R "$1" "$root.partial"; else mv "$1" "$root.partial"; fi
	chmod -R u+w "$root.partial"
	for d in bin pkg/tool; do
		[ ! -d "$root.partial/$d" ] || find "$root.partial/$d" -type f -exec chmod +x {} +
	done
	rm -rf "$root"
	mv "$root.partial" "$root"
}

if [ -n "$have" ]; then
	note "go $have on PATH is older than go.mod's $want: go mod download $mod@$ver"
	# Outside any module (an old go cannot read a newer go.mod's directives).
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	out=$(cd "$tmp" && GO111MODULE=on GOTOOLCHAIN=local \
		"$existing" mod download -json "$mod@$ver" 2>&1) ||
		fail "go $have could not download $mod@$ver from ${GOPROXY:-$("$existing" env GOPROXY)}: $(echo "$out" | grep -m1 -E '"Error"|go: ' | sed 's/^[[:space:]]*//')"
	src=$(echo "$out" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -f "$src/bin/go" ] || fail "go mod download gave no $mod@$ver/bin/go (got: ${src:-no Dir})"
	# The module cache is read-only and is cleaned by `go clean -modcache`:
	# keep a copy of our own, so the next run finds it in step 2.
	install_root "$src" cp
else
	command -v curl >/dev/null || fail "no go on PATH and no curl to fetch go $want (install curl, or any go)"
	command -v unzip >/dev/null || fail "no go on PATH and no unzip to unpack go $want (install unzip, or any go)"
	proxy=${GOPROXY:-https://proxy.golang.org}
	proxy=${proxy%%[,|]*}
	case $proxy in
	off|direct|"") fail "GOPROXY=${GOPROXY:-} names no proxy to fetch go $want from" ;;
	esac
	proxy=${proxy%/}
	note "no go on PATH: fetching $mod@$ver from $proxy"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	curl -fsSL --retry 2 -o "$tmp/mod.zip" "$proxy/$mod/@v/$ver.zip" 2>"$tmp/err" ||
		fail "could not fetch $proxy/$mod/@v/$ver.zip: $(head -1 "$tmp/err")"
	# The checksum database's line for the zip: "<mod> <ver> h1:<base64>".
	sum=""
	if [ "${GOSUMDB:-}" != off ]; then
		sum=$(curl -fsSL "$proxy/sumdb/sum.golang.org/lookup/$mod@$ver" 2>/dev/null |
			awk -v m="$mod" -v v="$ver" '$1 == m && $2 == v {print $3}')
		[ -n "$sum" ] || fail "no checksum database record for $mod@$ver at $proxy/sumdb/sum.golang.org (GOSUMDB=off skips the check)"
	fi
	mkdir -p "$tmp/x"
	unzip -q "$tmp/mod.zip" -d "$tmp/x" || fail "$mod@$ver.zip does not unpack"
	if [ -n "$sum" ]; then
		# h1: is golang.org/x/mod's dirhash Hash1: sha256 over the lines
		# "<sha256 hex>  <name>\n" of every file, sorted by name, base64.
		hex=$(cd "$tmp/x" && find . -type f -print | sed 's|^\./||' | LC_ALL=C sort |
			tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -c1-64)
		got="h1:$(printf "$(echo "$hex" | sed 's/../\\x&/g')" | base64 -w0)"
		[ "$got" = "$sum" ] || fail "$mod@$ver.zip hash $got does not match the checksum database's $sum"
	fi
	src=$tmp/x/$mod@$ver
	[ -f "$src/bin/go" ] || fail "$mod@$ver.zip has no bin/go"
	install_root "$src" mv
fi
got=$(goversion "$root/bin/go")
[ "$got" = "$want" ] || fail "$root/bin/go reports go${got:-?}, not go$want"
note "go $want in $root"
echo "$root/bin"
