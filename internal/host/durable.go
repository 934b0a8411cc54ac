//go:build !crashrec

package host

import "io/fs"

// durable is called after each write Root makes durable. Only the crashrec
// build (durable_crashrec.go, for the crash tests) records them; the
// agent's own builds do nothing here.
func durable(string, string, []byte, fs.FileMode) {}
