//go:build !emulatedtpm

package examples_test

// emulatedBuild: this test binary was built without the emulatedtpm tag, so
// examples/node/emulated-tpm.yaml is checked against the default agent.
const emulatedBuild = false
