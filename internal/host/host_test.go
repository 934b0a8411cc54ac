package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/safefile"
)

func TestExecRunner(t *testing.T) {
	r := ExecRunner{}
	out, err := r.Run(context.Background(), Command{Name: "sh", Args: []string{"-c", "cat; printf x"}, Stdin: []byte("in:")})
	if err != nil || string(out) != "in:x" {
		t.Fatalf("stdin: %q %v", out, err)
	}
	// No Stdin: the program reads /dev/null, not ours.
	out, err = r.Run(context.Background(), Command{Name: "sh", Args: []string{"-c", "cat"}})
	if err != nil || len(out) != 0 {
		t.Fatalf("nil stdin: %q %v", out, err)
	}
	_, err = r.Run(context.Background(), Command{Name: "sh", Args: []string{"-c", "echo out; echo oops >&2; exit 3"}, Env: []string{"A=b c"}})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 3 {
		t.Fatalf("want CommandError exit 3, got %v", err)
	}
	for _, want := range []string{"'A=b c' sh -c", "oops", "out"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Stderr gets the command's stderr on success and on failure alike.
	for _, code := range []string{"0", "4"} {
		var errOut bytes.Buffer
		_, err = r.Run(context.Background(), Command{Name: "sh", Args: []string{"-c", "echo banner >&2; echo last >&2; exit " + code}, Stderr: &errOut})
		if errOut.String() != "banner\nlast\n" {
			t.Errorf("exit %s: Stderr got %q", code, errOut.String())
		}
		if (err == nil) != (code == "0") || err != nil && !strings.Contains(err.Error(), "banner\nlast") {
			t.Errorf("exit %s: %v", code, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, Command{Name: "sleep", Args: []string{"5"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

func TestToolsFromEnv(t *testing.T) {
	env := map[string]string{EnvNmstatectl: "/opt/nmstatectl", EnvElemental: "/usr/bin/elemental-test", EnvDmidecode: "/sbin/dmi", "NODEREG_SYSTEMCTL": "/bin/sc"}
	got := ToolsFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	want := Tools{Nmstatectl: "/opt/nmstatectl", Nmcli: "nmcli", Nmc: "nmc", Elemental: "/usr/bin/elemental-test", Dmidecode: "/sbin/dmi"}
	if got != want {
		t.Errorf("ToolsFromEnv = %+v, want %+v", got, want)
	}
}

// NODEREG_DMIDECODE set and empty turns dmidecode off; any other empty
// entry keeps its default.
func TestToolsFromEnvEmptyDmidecodeIsOff(t *testing.T) {
	env := map[string]string{EnvDmidecode: "", EnvNmstatectl: ""}
	got := ToolsFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	want := DefaultTools()
	want.NoDmidecode = true
	if got != want {
		t.Errorf("ToolsFromEnv = %+v, want %+v", got, want)
	}
	if unset := ToolsFromEnv(func(string) (string, bool) { return "", false }); unset.NoDmidecode {
		t.Errorf("unset NODEREG_DMIDECODE turned dmidecode off")
	}
}

// Root maps every host path below its directory, writes atomically, and
// reads without following a planted symlink; Print reads the same files
// and writes nothing, saying what it would do with the path as it is on
// this machine.
func TestRootAndPrint(t *testing.T) {
	dir := t.TempDir()
	fs := Root(dir)
	if err := fs.MkdirAll("/oem/nodereg", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/oem/nodereg/x", []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "oem/nodereg/x")); err != nil || string(b) != "one\n" {
		t.Fatalf("written below the root: %q, %v", b, err)
	}
	if b, err := fs.ReadFile("/oem/nodereg/x", 64); err != nil || string(b) != "one\n" {
		t.Fatalf("ReadFile: %q, %v", b, err)
	}
	if _, err := fs.ReadFile("/oem/nodereg/x", 2); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("ReadFile over the limit: %v", err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "oem/nodereg/link")); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile("/oem/nodereg/link", 1<<20); !errors.Is(err, safefile.ErrSymlink) {
		t.Errorf("ReadFile followed a symlink: %v", err)
	}

	var out strings.Builder
	p := Print{Root: fs, W: &out}
	if b, err := p.ReadFile("/oem/nodereg/x", 64); err != nil || string(b) != "one\n" {
		t.Errorf("Print reads the host: %q, %v", b, err)
	}
	if err := p.WriteFile("/oem/nodereg/x", []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove("/oem/nodereg/x"); err != nil {
		t.Fatal(err)
	}
	if aside, err := p.SetAside("/oem/nodereg/x"); err != nil || aside != "(not in a dry run)" {
		t.Errorf("SetAside: %q, %v", aside, err)
	}
	at := filepath.Join(dir, "oem/nodereg/x")
	want := "# ---- would write " + at + " (0600)\ntwo\n# would remove " + at + "\n# would keep " + at + " aside as " + at + ".corrupt-<time>\n"
	if out.String() != want {
		t.Errorf("Print said\n%s\nwant\n%s", out.String(), want)
	}
	if b, err := os.ReadFile(at); err != nil || string(b) != "one\n" {
		t.Errorf("Print changed the file: %q, %v", b, err)
	}
}

// NotLive runs read-only commands through the real runner and only says
// the others.
func TestNotLive(t *testing.T) {
	var ran []string
	real := RunFunc(func(_ context.Context, c Command) ([]byte, error) {
		ran = append(ran, c.Name)
		return []byte("out"), nil
	})
	var said []string
	n := NotLive{Real: real, Say: func(c Command) { said = append(said, c.String()) }}
	if out, err := n.Run(context.Background(), Command{Name: "nmstatectl", Args: []string{"gc", "-"}, ReadOnly: true}); err != nil || string(out) != "out" {
		t.Fatalf("read-only: %q, %v", out, err)
	}
	if out, err := n.Run(context.Background(), Command{Name: "nmcli", Args: []string{"connection", "reload"}}); err != nil || out != nil {
		t.Fatalf("live command: %q, %v", out, err)
	}
	if len(ran) != 1 || ran[0] != "nmstatectl" || len(said) != 1 || said[0] != "nmcli connection reload" {
		t.Errorf("ran %v, said %v", ran, said)
	}
}
