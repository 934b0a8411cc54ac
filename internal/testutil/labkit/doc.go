// Package labkit is the one lab machinery every lab shares (tests/lab,
// tests/boot, tests/vm, and the NetworkManager of internal/testutil/nmlab):
// network namespaces and the code and processes run inside them
// (netns_linux.go), the regserver process with its flags, its wait until
// ready (polled: its "listening on" lines, then its admin API) and its stop,
// with its log in a failed test's output (process.go), and regserver's
// admin client (admin.go). The binaries come from internal/testutil/testbin
// (Build: once per source tree, shared by every package of a `go test`
// run). No other package starts regserver or runs `go build`
// (tests/deps' TestOneLab holds it). Only tests import it.
package labkit
