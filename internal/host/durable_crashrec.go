//go:build crashrec

package host

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// CrashRecEnv names the file a crashrec build appends one JSON line to for
// each durable operation of Root, in the order they reached the disk: op
// (write, remove, mkdir, aside), the host path, for a write the bytes and
// the mode (for aside, the new name). The crash tests replay every prefix of the
// sequence (docs/apply.md, "Crash consistency"). Never set outside them.
const CrashRecEnv = "NODEREG_CRASHREC_LOG"

// DurableOp is one recorded line.
type DurableOp struct {
	Op   string      `json:"op"`
	Path string      `json:"path"`
	Data []byte      `json:"data,omitempty"`
	To   string      `json:"to,omitempty"`
	Mode fs.FileMode `json:"mode,omitempty"`
}

var recMu sync.Mutex

func durable(op, p string, data []byte, perm fs.FileMode) {
	file := os.Getenv(CrashRecEnv)
	if file == "" {
		return
	}
	rec := DurableOp{Op: op, Path: p, Data: data, Mode: perm}
	if op == "aside" {
		rec.Data, rec.To = nil, string(data)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	recMu.Lock()
	defer recMu.Unlock()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// A lost record would make the test replay a sequence that never
		// happened: better no run at all.
		fmt.Fprintln(os.Stderr, "crashrec:", err)
		os.Exit(70)
	}
}
