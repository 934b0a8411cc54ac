package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noHang fails the test if fn does not return: a read that blocks on a
// FIFO would otherwise hold the test until the global timeout.
func noHang(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("blocked")
		return nil
	}
}

func TestRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path string
		want       error
		says       string
	}{
		{"fifo", fifo, ErrNotRegular, "a FIFO"},
		{"symlink to a file", link("l-file", target), ErrSymlink, "symbolic link"},
		{"symlink to a fifo", link("l-fifo", fifo), ErrSymlink, "symbolic link"},
		{"dangling symlink", link("l-none", filepath.Join(dir, "none")), ErrSymlink, "symbolic link"},
		{"symlink to /dev/zero", link("l-zero", "/dev/zero"), ErrSymlink, "symbolic link"},
		{"character device", "/dev/zero", ErrNotRegular, "a character device"},
		{"directory", dir, ErrNotRegular, "a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := noHang(t, func() error {
				_, err := ReadFile(c.path, 1<<20)
				return err
			})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("got %v, want %v naming %s and %q", err, c.want, c.path, c.says)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Errorf("%v is not a *fs.PathError", err)
			}
		})
	}
	// The target itself is read.
	if b, err := ReadFile(target, 6); err != nil || string(b) != "secret" {
		t.Errorf("regular file: %q %v", b, err)
	}
}

// TestFIFOWithWriter: a FIFO whose writer is there and silent does not
// block either.
func TestFIFOWithWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = noHang(t, func() error { _, err := Open(fifo); return err })
	if !errors.Is(err, ErrNotRegular) {
		t.Errorf("got %v", err)
	}
}

func TestMissingFile(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "none"), 10)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestSizeLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 100); err != nil || len(b) != 100 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
	_, err := ReadFile(p, 99)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) {
		t.Errorf("over the limit: %v", err)
	}
}

const testPEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIBATAKBggqhkjOPQQDAjA=\n-----END CERTIFICATE-----\n"

func TestReadPEM(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	noPEM := filepath.Join(dir, "ca.txt")
	big := filepath.Join(dir, "big.pem")
	for p, b := range map[string]string{good: testPEM, noPEM: "not a certificate\n", big: testPEM + strings.Repeat("#", MaxPEM)} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := ReadPEM(good); err != nil || string(b) != testPEM {
		t.Errorf("good PEM: %v", err)
	}
	if _, err := ReadPEM(noPEM); !errors.Is(err, ErrNoPEM) || !strings.Contains(err.Error(), noPEM) {
		t.Errorf("no PEM: %v", err)
	}
	if _, err := ReadPEM(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big PEM: %v", err)
	}
	if err := CheckPEM([]byte(testPEM + strings.Repeat("#", MaxPEM))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big PEM text: %v", err)
	}
	if err := CheckPEM([]byte("/etc/ssl/ca.pem")); !errors.Is(err, ErrNoPEM) {
		t.Errorf("path as PEM text: %v", err)
	}
}

// TestSwappedAfterTheLook: a symlink or a FIFO put in place after Open's
// first look is still refused, by the open itself.
func TestSwappedAfterTheLook(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/etc/hostname", link); err != nil {
		t.Fatal(err)
	}
	if _, err := openChecked(link); !errors.Is(err, ErrSymlink) {
		t.Errorf("symlink: %v", err)
	}
	if err := noHang(t, func() error { _, err := openChecked(fifo); return err }); !errors.Is(err, ErrNotRegular) {
		t.Errorf("fifo: %v", err)
	}
}

func TestSetAside(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "network-manifest.json")
	now := time.Unix(1700000000, 0)
	var asides []string
	for i := range 2 {
		if err := os.WriteFile(p, []byte{'{', byte('0' + i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		aside, err := SetAside(p, now)
		if err != nil {
			t.Fatal(err)
		}
		asides = append(asides, aside)
		if b, err := os.ReadFile(aside); err != nil || b[1] != byte('0'+i) {
			t.Errorf("%s: %q %v", aside, b, err)
		}
	}
	if asides[0] != p+".corrupt-1700000000" || asides[1] != p+".corrupt-1700000000.1" {
		t.Errorf("names %q", asides)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still there: %v", p, err)
	}
}

// TestSetAsideReturnsOtherErrors: a name the filesystem refuses (here too
// long) is an error, not a reason to try the next counter for ever.
func TestSetAsideReturnsOtherErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, strings.Repeat("m", 240)) // fits; with ".corrupt-N" it does not
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := noHang(t, func() error { _, err := SetAside(p, time.Unix(1700000000, 0)); return err })
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("err = %v, want ENAMETOOLONG", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "{" {
		t.Errorf("original moved or changed: %q %v", b, err)
	}
}

// TestSetAsideNeverReplaces: a set-aside name taken between any check and
// the rename keeps its content, both with RENAME_NOREPLACE and with the
// link fallback for filesystems that refuse it.
func TestSetAsideNeverReplaces(t *testing.T) {
	for name, rename := range map[string]func(string, string) error{
		"renameat2": renameNoReplace,
		"link":      linkNoReplace,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			from, to := filepath.Join(dir, "manifest"), filepath.Join(dir, "manifest.corrupt-1")
			if err := os.WriteFile(from, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := rename(from, to); !errors.Is(err, fs.ErrExist) {
				t.Errorf("err = %v, want ErrExist", err)
			}
			for p, want := range map[string]string{from: "new", to: "old"} {
				if b, err := os.ReadFile(p); err != nil || string(b) != want {
					t.Errorf("%s: %q %v, want %q", p, b, err, want)
				}
			}
			if err := rename(from, to+"x"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(from); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there: %v", from, err)
			}
		})
	}
}

// TestSetAsideBounded: when every name is taken the error says so.
func TestSetAsideBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.yaml")
	now := time.Unix(1700000000, 0)
	base := p + ".corrupt-1700000000"
	for i := range maxAsideNames {
		n := base
		if i > 0 {
			n = base + "." + strconv.Itoa(i)
		}
		if err := os.WriteFile(n, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := SetAside(p, now); !errors.Is(err, fs.ErrExist) {
		t.Errorf("err = %v, want ErrExist", err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("original gone: %v", err)
	}
}
