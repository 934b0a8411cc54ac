#!/bin/sh
# Runs every fuzz target for SECONDS seconds each, one at a time (the seed
# corpora under */testdata/fuzz also run in plain `go test`).
# Usage: tests/fuzz.sh [SECONDS]   (default 5)
set -eu
secs=${1:-5}
cd "$(dirname "$0")/.."
# package target
targets="
./protocol FuzzDecodeFrame
./protocol FuzzDecodeConfigReply
./protocol FuzzEstimateNodes
./apply FuzzRender
./apply FuzzParseGC
./agent FuzzLoadState
./nmstate FuzzGenerateKeyfiles
./bootstrap FuzzFromConfigFile
"
echo "$targets" | while read -r pkg name; do
	[ -n "$pkg" ] || continue
	echo "== $name ($pkg, ${secs}s)"
	# A short minimisation keeps large seeds (the captured MsgConfig) from
	# eating the time box; -parallel 1 shares the machine.
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "${secs}s" -fuzzminimizetime 2s -parallel 1 "$pkg"
done
