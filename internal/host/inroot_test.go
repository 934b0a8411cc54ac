package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
)

// outsideMark is what every file outside the root holds: a reader under
// --root that returns it has read outside the root.
const outsideMark = "OUTSIDE"

// outsideTree fills dir (outside the root) with what each operation of
// the edge would reach through a link: a file, a directory with an
// entry, a link, a temp file of atomicfile's, a CA, a character device.
func outsideTree(t *testing.T, dir string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	for name, text := range map[string]string{
		"x": outsideMark, "d/outside-entry": outsideMark, ".nodereg-123.tmp": outsideMark,
		"ca.pem": "-----BEGIN CERTIFICATE-----\nFrom: " + outsideMark + "\n\nT1VUU0lERQ==\n-----END CERTIFICATE-----\n",
	} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	must(t, os.Symlink(outsideMark, filepath.Join(dir, "lnk")))
	// /dev/null's numbers: a device OpenDevice would open if it got there.
	_ = syscall.Mknod(filepath.Join(dir, "tpm"), syscall.S_IFCHR|0o600, 1<<8|3)
}

// edgeOp is one operation of the host edge at host path base+"/..." (base
// is where the planted link sits); it returns what it read, for a reader.
type edgeOp struct {
	name string
	run  func(files Root, base string) ([]byte, error)
}

var edgeOps = []edgeOp{
	// Readers.
	{"ReadFile", func(r Root, b string) ([]byte, error) { return r.ReadFile(b+"/x", 1<<10) }},
	{"Open", func(r Root, b string) ([]byte, error) {
		f, err := r.Open(b+"/x", 1<<10)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}},
	{"ReadDir", func(r Root, b string) ([]byte, error) { return names(r.ReadDir(b + "/d")) }},
	{"ReadDir of the link", func(r Root, b string) ([]byte, error) { return names(r.ReadDir(b)) }},
	{"Readlink", func(r Root, b string) ([]byte, error) {
		s, err := r.Readlink(b + "/lnk")
		return []byte(s), err
	}},
	{"Lstat", func(r Root, b string) ([]byte, error) { return info(r.Lstat(b + "/x")) }},
	{"Stat", func(r Root, b string) ([]byte, error) { return info(r.Stat(b + "/x")) }},
	{"OpenDevice", func(r Root, b string) ([]byte, error) {
		d, err := r.OpenDevice(b + "/tpm")
		if err != nil {
			return nil, err
		}
		d.Close()
		return []byte(outsideMark + ": the device outside was opened"), nil
	}},
	{"ReadPEM", func(r Root, b string) ([]byte, error) { return ReadPEM(r, b+"/ca.pem") }},
	{"InRoot", func(r Root, b string) ([]byte, error) {
		p, err := r.InRoot(b + "/x")
		if err != nil {
			return nil, err
		}
		return escaped(r, p), nil
	}},
	// Writers.
	{"WriteFile", func(r Root, b string) ([]byte, error) { return nil, r.WriteFile(b+"/x", []byte("new"), 0o600) }},
	{"WriteFile new", func(r Root, b string) ([]byte, error) { return nil, r.WriteFile(b+"/d/new", []byte("new"), 0o600) }},
	{"MkdirAll", func(r Root, b string) ([]byte, error) { return nil, r.MkdirAll(b+"/d/sub/dir", 0o755) }},
	{"Remove", func(r Root, b string) ([]byte, error) { return nil, r.Remove(b + "/x") }},
	{"Remove a directory's entry", func(r Root, b string) ([]byte, error) { return nil, r.Remove(b + "/d/outside-entry") }},
	{"Lock", func(r Root, b string) ([]byte, error) {
		release, err := r.Lock(context.Background(), b+"/.nodereg.lock", 0)
		if err != nil {
			return nil, err
		}
		// The lock file goes with the release: look while it is held.
		var got []byte
		if p := r.Path(b + "/.nodereg.lock"); exists(p) {
			got = escaped(r, p)
		}
		return got, release()
	}},
	{"RemoveStale", func(r Root, b string) ([]byte, error) {
		removed, err := r.RemoveStale(b)
		return []byte(strings.Join(removed, " ")), err
	}},
	{"SetAside", func(r Root, b string) ([]byte, error) {
		aside, err := r.SetAside(b + "/x")
		return []byte(aside), err
	}},
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// escaped says (with outsideMark) where p is when the kernel, following
// every link, takes it outside root r.
func escaped(r Root, p string) []byte {
	real, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return nil // nothing there: not outside
	}
	top, err := filepath.EvalSymlinks(string(r))
	if err != nil || (real != top && !strings.HasPrefix(real, top+"/")) {
		return []byte(outsideMark + ": " + real)
	}
	return nil
}

func names(entries []fs.DirEntry, err error) ([]byte, error) {
	var out []string
	for _, e := range entries {
		n := e.Name()
		if n == "outside-entry" || n == "x" || n == "lnk" {
			n = outsideMark + ": " + n
		}
		out = append(out, n)
	}
	return []byte(strings.Join(out, " ")), err
}

// info reports a file of outsideMark's size (7 bytes) as read outside:
// nothing under the root is that size.
func info(fi fs.FileInfo, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if fi.Mode().IsRegular() && fi.Size() == int64(len(outsideMark)) {
		return []byte(outsideMark + ": stat of the file outside"), nil
	}
	return nil, nil
}

// Every reader and writer of the edge under --root, with a link in an
// intermediate component that leads outside the root: R/oem/nodereg (the
// manifest's and the applicator's case) or R/oem (render --root's network
// policy), absolute or climbing with "..". Each is resolved inside the
// root, as openat2's RESOLVE_IN_ROOT resolves: the operation fails or acts
// inside R, nothing outside is read, and nothing outside changes.
func TestRootConfinesEveryOperation(t *testing.T) {
	for _, base := range []string{"/oem/nodereg", "/oem"} {
		for _, shape := range []string{"absolute", "relative"} {
			for _, op := range edgeOps {
				t.Run(base+"/"+shape+"/"+op.name, func(t *testing.T) {
					root, outside := t.TempDir(), t.TempDir()
					outsideTree(t, outside)
					link := filepath.Join(root, base)
					must(t, os.MkdirAll(filepath.Dir(link), 0o755))
					target := outside
					if shape == "relative" {
						rel, err := filepath.Rel(filepath.Dir(link), outside)
						must(t, err)
						target = rel
					}
					must(t, os.Symlink(target, link))
					// The link leads outside as the kernel follows it.
					if b, err := os.ReadFile(filepath.Join(link, "x")); err != nil || string(b) != outsideMark {
						t.Fatalf("planted link does not lead outside: %q %v", b, err)
					}
					before := testutil.Tree(t, outside)

					got, err := op.run(Root(root), base)
					if bytes.Contains(got, []byte(outsideMark)) || bytes.Contains(got, []byte(outside)) {
						t.Errorf("%s read outside the root: %q", op.name, got)
					}
					if diff := testutil.TreeDiff(before, testutil.Tree(t, outside)); diff != "" {
						t.Errorf("%s changed the tree outside the root:\n%s", op.name, diff)
					}
					t.Logf("%s: %q, %v", op.name, got, err)
				})
			}
		}
	}
}

// Links inside the root keep working, resolved in it: an absolute one
// (R/var/run -> /run, as images carry) starts again at R, one that climbs
// too far stops at R, and writes through them land in R. A loop ends in
// ELOOP.
func TestRootResolvesLinksInside(t *testing.T) {
	root := t.TempDir()
	r := Root(root)
	must(t, os.MkdirAll(filepath.Join(root, "run"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "var"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "run/f"), []byte("inside"), 0o600))
	must(t, os.Symlink("/run", filepath.Join(root, "var/run")))
	must(t, os.Symlink("../../../../../../run", filepath.Join(root, "etc/run")))
	must(t, os.Symlink("/loop", filepath.Join(root, "loop")))

	for _, p := range []string{"/var/run/f", "/etc/run/f", "/var/run/../run/f"} {
		if b, err := r.ReadFile(p, 100); err != nil || string(b) != "inside" {
			t.Errorf("ReadFile(%s) = %q, %v; want the file under the root", p, b, err)
		}
	}
	must(t, r.MkdirAll("/var/run/nodereg", 0o755))
	must(t, r.WriteFile("/etc/run/nodereg/g", []byte("written"), 0o600))
	if b, err := os.ReadFile(filepath.Join(root, "run/nodereg/g")); err != nil || string(b) != "written" {
		t.Errorf("write through the in-root links: %q, %v", b, err)
	}
	if fi, err := r.Lstat("/var/run"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat of the link itself: %v, %v", fi, err)
	}
	entries, err := r.ReadDir("/var/run")
	if got, _ := names(entries, err); err != nil || !slices.Contains(strings.Fields(string(got)), "f") {
		t.Errorf("ReadDir through the link: %q, %v", got, err)
	}
	if _, err := r.ReadFile("/loop/x", 100); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a link loop: %v, want ELOOP", err)
	}
}
