package host

import (
	"context"
	"errors"
	"strings"
	"testing"
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
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, Command{Name: "sleep", Args: []string{"5"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

func TestToolsFromEnv(t *testing.T) {
	env := map[string]string{EnvNmstatectl: "/opt/nmstatectl", EnvElemental: "/usr/bin/elemental-test", "NODEREG_SYSTEMCTL": "/bin/sc"}
	got := ToolsFromEnv(func(k string) string { return env[k] })
	want := Tools{Nmstatectl: "/opt/nmstatectl", Nmcli: "nmcli", Nmc: "nmc", Elemental: "/usr/bin/elemental-test"}
	if got != want {
		t.Errorf("ToolsFromEnv = %+v, want %+v", got, want)
	}
}
