// Package labkit is the one lab machinery every lab shares (tests/lab,
// tests/boot, tests/vm, and the NetworkManager of internal/testutil/nmlab):
// network namespaces and the code and processes run inside them
// (netns_linux.go), the regserver process with its flags, its wait until
// ready (polled: its "listening on" lines, then its admin API) and its stop,
// with its log in a failed test's output (process.go), regserver's admin
// client (admin.go), and the binaries, built once per source tree by
// internal/testutil/testbin and shared by every package of a `go test` run
// (Binary). No other package starts regserver or runs `go build`
// (tests/deps' TestOneLab holds it). Only tests import it.
package labkit

import (
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// Binary is the package at pkg (relative to the module root, e.g.
// "./cmd/agent") built with tags, from the cache every package of the run
// shares: the first to ask builds it, the others wait and use it.
func Binary(tb testing.TB, pkg string, tags ...string) string {
	tb.Helper()
	return testbin.Build(tb, pkg, tags...)
}
