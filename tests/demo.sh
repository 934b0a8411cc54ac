#!/usr/bin/env bash
# The main job: start the reference server with the example config on a free
# loopback port, register two machines against it with the agent in
# --dry-run mode (one with a real software TPM, one with its MAC), show what
# each got, stop everything. Writes only under a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/nodereg-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Bold headings only on a terminal, never with NO_COLOR (https://no-color.org),
# as the agent's own log (internal/logging): piped output stays plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi
# The binaries, overridable (tests/cli runs the demo on its own builds).
AGENT=${AGENT:-./bin/nodereg-agent}
REGSERVER=${REGSERVER:-./bin/regserver}
# shorten cuts the value of a YAML line that is one long token (the state
# file's nodereg-ak, a 2 KB AK blob) to its start and its length.
shorten() {
  awk '{ if (length($0) > 160 && $0 ~ /^ *[A-Za-z0-9_.-]+: [A-Za-z0-9+\/=]+$/) {
           i = index($0, ": "); printf "%s... (%d characters, shortened by the demo)\n", substr($0, 1, i + 41), length($0) - i - 1
         } else print }'
}

if ! command -v swtpm >/dev/null 2>&1; then
  say "installing Debian's swtpm (software TPM)"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends swtpm swtpm-tools >/dev/null
fi

say "starting regserver (cmd/regserver/example.yaml) on a free loopback port"
"$REGSERVER" --config cmd/regserver/example.yaml --store "$work/store.db" \
  --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$work/regserver.out" 2>"$work/regserver.log" &
pids+=($!)
base=""
for _ in $(seq 100); do
  base=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/regserver.out" | head -1)
  [ -n "$base" ] && grep -q '^admin listening on' "$work/regserver.out" && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/regserver.log"; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "regserver did not start"; cat "$work/regserver.log"; exit 1; }
admin=$(sed -n 's/^admin listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/regserver.out" | head -1)
echo "regserver at $base, admin API at $admin"

say "starting swtpm, a software TPM 2.0, on a unix socket"
mkdir -p "$work/tpm"
swtpm socket --tpm2 --tpmstate dir="$work/tpm" --server type=unixio,path="$work/tpm/sock" \
  --ctrl type=unixio,path="$work/tpm/ctrl" --flags not-need-init,startup-clear >"$work/swtpm.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/tpm/sock" ] && break; sleep 0.1; done

# A node is a scratch root made from the inventory fixture of a q35 VM (its
# /sys, /proc and os-release), so the demo shows the same machine on every
# host. Nothing under it is written (--dry-run).
node() {
  local root=$1 token=$2 auth=$3
  cp -a agent/inventory/testdata/vm1 "$root"
  mkdir -p "$root/oem/registration"
  cat >"$root/oem/registration/config.yaml" <<YAML
elemental:
  registration:
    url: $base/elemental/registration/$token
    auth: $auth
    tpm-device: unix://$work/tpm/sock
YAML
}

if command -v nmstatectl >/dev/null 2>&1; then nm="nmstatectl gc"; else nm="the built-in translator (no nmstatectl here)"; fi
say "machine 1: auth tpm (swtpm), nmstate template (keyfile by $nm, and yip applicator): nodereg-agent --dry-run"
node "$work/node1" demo-token tpm
"$AGENT" --root "$work/node1" --dry-run --deadline 60s --network-timeout 60s | shorten

say "machine 2: auth mac, nmconnections template (keyfile and yip applicator): nodereg-agent --dry-run"
node "$work/node2" demo-keyfile-token mac
"$AGENT" --root "$work/node2" --dry-run --deadline 60s --network-timeout 60s | shorten

say "what regserver recorded: claims"
if command -v curl >/dev/null 2>&1; then
  # regserver generated the admin token beside its store (admin token in ...).
  curl -fsS -H "Authorization: Bearer $(cat "$work/store.db.admin-token")" "$admin/admin/claims"; echo
else
  echo "(install curl to see $admin/admin/claims)"
fi

say "regserver log"
cat "$work/regserver.log"
