//go:build crashrec

package host

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The crashrec build records every durable operation in order, with what
// a replay needs.
func TestCrashRecRecordsInOrder(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "ops.jsonl")
	t.Setenv(CrashRecEnv, log)
	r := Root(filepath.Join(dir, "root"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.MkdirAll("/oem", 0o700))
	must(r.WriteFile("/oem/f", []byte("x"), 0o600))
	must(r.WriteFile("/oem/g", []byte("not yaml"), 0o600))
	_, err := r.SetAside("/oem/g")
	must(err)
	must(r.Remove("/oem/f"))
	f, err := os.Open(log)
	must(err)
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var op DurableOp
		must(json.Unmarshal(sc.Bytes(), &op))
		got = append(got, op.Op+" "+op.Path+" "+string(op.Data)+" "+filepath.Base(op.To))
	}
	want := []string{"mkdir /oem  .", "write /oem/f x .", "write /oem/g not yaml .", "aside /oem/g  g.corrupt-*", "remove /oem/f  ."}
	match := func(g, w string) bool { ok, _ := filepath.Match(w, g); return ok }
	if !slices.EqualFunc(got, want, match) {
		t.Errorf("recorded:\n%q\nwant:\n%q", got, want)
	}
}
