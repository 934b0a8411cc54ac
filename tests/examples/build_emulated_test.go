//go:build emulatedtpm

package examples_test

// emulatedBuild: built with the emulatedtpm tag (make test-emulated), so
// examples/node/emulated-tpm.yaml registers with the emulated agent.
const emulatedBuild = true
