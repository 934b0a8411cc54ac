// Package boot simulates a node's boots end to end: a network namespace per
// node joined by a veth to a namespace where bin/regserver listens, a scratch
// root, mudler/yip's executor for the initramfs stage, a real NetworkManager
// on a private system bus, and bin/nodereg-agent run as the boot service would run
// it. The tests carry the build tag bootsim (root, namespaces and
// NetworkManager needed): go test -tags bootsim -count=1 -v ./tests/boot/.
// See docs/boot-simulation.md.
package boot
