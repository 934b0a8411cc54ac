#!/usr/bin/env bash
# The main job: start the reference server with the example config on a free
# loopback port, run the agent against it with --dry-run, show what the
# machine got, stop the server. Writes only under a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/nodereg-demo.XXXXXX)
srv_pid=""
cleanup() {
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting regserver (cmd/regserver/example.yaml) on a free loopback port"
./bin/regserver --config cmd/regserver/example.yaml --store "$work/store.json" \
  --listen 127.0.0.1:0 >"$work/regserver.out" 2>"$work/regserver.log" &
srv_pid=$!
base=""
for _ in $(seq 100); do
  base=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/regserver.out" | head -1)
  [ -n "$base" ] && break
  kill -0 "$srv_pid" 2>/dev/null || { cat "$work/regserver.log"; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "regserver did not start"; cat "$work/regserver.log"; exit 1; }
echo "regserver at $base"

# The node: a scratch root made from the inventory fixture of a q35 VM (its
# /sys, /proc and os-release), so the demo shows the same machine on every
# host. Identity: its MAC (auth: mac). Nothing under it is written (--dry-run).
root="$work/node"
cp -a agent/inventory/testdata/vm1 "$root"
mkdir -p "$root/oem/registration"
cat >"$root/oem/registration/config.yaml" <<YAML
elemental:
  registration:
    url: $base/elemental/registration/demo-token
    auth: mac
YAML

say "agent --dry-run"
./bin/agent --root "$root" --dry-run --deadline 60s --network-timeout 60s

say "what regserver recorded (admin view)"
if command -v curl >/dev/null 2>&1; then
  curl -fsS "$base/admin/claims"; echo
else
  ./bin/regserver --help >/dev/null 2>&1 || true
  echo "(install curl to see $base/admin/claims)"
fi

say "regserver log"
cat "$work/regserver.log"
