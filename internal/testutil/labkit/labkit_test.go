package labkit

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// A regserver that exits before it listens is an ExitedError carrying its
// status and its words, for the cases where that is the outcome.
func TestRefusedStartIsAnExitedError(t *testing.T) {
	_, err := RegserverOptions{Args: []string{"--no-such-flag"}}.Launch()
	var exit *ExitedError
	if !errors.As(err, &exit) {
		t.Fatalf("Launch with a bad flag: %v, want an ExitedError", err)
	}
	if exit.State.ExitCode() != 64 || !strings.Contains(exit.Stderr, "no-such-flag") {
		t.Errorf("exit %d, stderr %q: want 64 naming the flag", exit.State.ExitCode(), exit.Stderr)
	}
}

// With --admin-listen the start returns once the admin API answers, with
// the token regserver generated beside its store: the first call of a case
// succeeds, and the API still refuses a request without the token.
func TestStartWaitsForTheAdminAPI(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "state.db")
	rs := StartRegserver(t, "--config", filepath.Join(testbin.ModuleRoot(), "examples", "regserver.yaml"),
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", store)
	tok, err := os.ReadFile(store + ".admin-token")
	if err != nil || rs.Admin.Token != strings.TrimSpace(string(tok)) || rs.Admin.Token == "" {
		t.Fatalf("admin token %q, the file beside the store holds %q (%v)", rs.Admin.Token, tok, err)
	}
	if _, err := rs.Admin.Do(http.MethodGet, "/admin/pools"); err != nil {
		t.Errorf("the first admin call after the start: %v", err)
	}
	if _, err := (Admin{Addr: rs.Admin.Addr}).Do(http.MethodGet, "/admin/pools"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("admin call without the token: %v, want 401", err)
	}
	if !strings.HasPrefix(rs.Base, "http://127.0.0.1:") || rs.AdminBase() != "http://"+rs.Admin.Addr {
		t.Errorf("Base %q, AdminBase %q", rs.Base, rs.AdminBase())
	}
	if !rs.Stop(30*time.Second) || rs.Cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("SIGTERM: %v, want exit 0\n%s", rs.Cmd.ProcessState, rs.Stderr)
	}
}
