//go:build bootsim

package boot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
)

// durableOp is one line of the crashrec build's record (internal/host,
// durable_crashrec.go): a write, remove, mkdir or aside through host.Root,
// in the order it reached the disk.
type durableOp struct {
	Op   string      `json:"op"`
	Path string      `json:"path"`
	Data []byte      `json:"data"`
	To   string      `json:"to"`
	Mode fs.FileMode `json:"mode"`
}

func (o durableOp) String() string { return o.Op + " " + o.Path }

// cut is one power cut: the first k operations reached the disk, and the
// (k+1)th left what variant says.
type cut struct {
	k       int
	variant string
}

// The ways operation k+1, a write, can be caught by the cut: its temp file
// whole but not renamed (atomicfile.Write's fsync done, rename not), or,
// where a rename is not atomic, the target torn: empty, or half written.
const (
	cutClean    = "clean"
	cutTemp     = "temp file left"
	cutTornNone = "target torn (empty)"
	cutTornHalf = "target torn (half)"
)

// cutPoints are every prefix of ops, and for each write the states a cut
// during it can leave.
func cutPoints(ops []durableOp) []cut {
	var out []cut
	for k := 0; k <= len(ops); k++ {
		out = append(out, cut{k, cutClean})
		if k < len(ops) && ops[k].Op == "write" {
			out = append(out, cut{k, cutTemp}, cut{k, cutTornNone}, cut{k, cutTornHalf})
		}
	}
	return out
}

func (c cut) torn() bool { return strings.HasPrefix(c.variant, "target torn") }

func (c cut) describe(ops []durableOp) string {
	s := fmt.Sprintf("after %d of %d operations", c.k, len(ops))
	if c.k > 0 {
		s += " (last: " + ops[c.k-1].String() + ")"
	}
	if c.variant != cutClean {
		s += ", during " + ops[c.k].String() + ": " + c.variant
	}
	return s
}

func readOps(t *testing.T, file string) []durableOp {
	t.Helper()
	_, err := os.Stat(file) // the recorder always writes its log
	must(t, err)
	return testutil.JSONLines[durableOp](t, file)
}

// entry is a file or directory of a saved tree.
type entry struct {
	dir  bool
	mode fs.FileMode
	data []byte
}

// saveTree is the node's disk (its /oem and /etc) as the run found it.
func saveTree(t *testing.T, m *machine) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for _, top := range []string{"oem", "etc"} {
		err := filepath.WalkDir(m.path(top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.root, p)
			e := entry{dir: d.IsDir(), mode: info.Mode().Perm()}
			if d.Type().IsRegular() {
				if e.data, err = os.ReadFile(p); err != nil {
					return err
				}
			}
			out[rel] = e
			return nil
		})
		must(t, err)
	}
	return out
}

// replay puts the node's disk in the state cut c leaves: the saved tree,
// then the first c.k operations, then what the cut left of the next one.
func replay(t *testing.T, m *machine, initial map[string]entry, ops []durableOp, c cut) {
	t.Helper()
	for _, top := range []string{"oem", "etc"} {
		must(t, os.RemoveAll(m.path(top)))
	}
	for _, rel := range slices.Sorted(maps.Keys(initial)) {
		e := initial[rel]
		if e.dir {
			must(t, os.MkdirAll(m.path(rel), e.mode))
			continue
		}
		must(t, os.WriteFile(m.path(rel), e.data, e.mode))
	}
	// The kernel drops the run's flock with the power; its file stays.
	must(t, os.WriteFile(m.path("oem/registration/.nodereg.lock"), []byte("4194303\n"), 0o600))
	for _, op := range ops[:c.k] {
		p := m.path(op.Path)
		switch op.Op {
		case "write":
			must(t, os.WriteFile(p+".replay", op.Data, op.Mode))
			must(t, os.Rename(p+".replay", p))
		case "remove":
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		case "mkdir":
			must(t, os.MkdirAll(p, op.Mode))
		case "aside":
			must(t, os.Rename(p, filepath.Join(filepath.Dir(p), filepath.Base(op.To))))
		default:
			t.Fatalf("unknown recorded operation %q", op.Op)
		}
	}
	if c.variant == cutClean {
		return
	}
	op := ops[c.k]
	p := m.path(op.Path)
	switch c.variant {
	case cutTemp:
		must(t, os.WriteFile(filepath.Join(filepath.Dir(p), ".nodereg-4242.tmp"), op.Data, op.Mode))
	case cutTornNone:
		must(t, os.WriteFile(p, nil, op.Mode))
	case cutTornHalf:
		must(t, os.WriteFile(p, op.Data[:len(op.Data)/2], op.Mode))
	}
}

// seen is what the next boot starts from: /oem, and /etc when it is kept.
func (m *machine) seen(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	tops := []string{"oem"}
	if m.keepEtc {
		tops = append(tops, "etc")
	}
	for _, top := range tops {
		err := filepath.WalkDir(m.path(top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.root, p)
			fmt.Fprintf(h, "%s %v\n", rel, d.IsDir())
			if d.Type().IsRegular() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%x\n", sha256.Sum256(b))
			}
			return nil
		})
		must(t, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
