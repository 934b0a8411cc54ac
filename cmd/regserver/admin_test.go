package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func adminStatus(t *testing.T, url, auth string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/admin/pools", nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The admin API on loopback refuses requests without the token: the one
// generated at start (0600 file, path printed beside the store), the one
// of --admin-token-file; only --admin-insecure serves without, and warns.
func TestAdminTokenRequiredOnLoopback(t *testing.T) {
	dir := t.TempDir()
	storePath := filepath.Join(dir, "store.db")
	rs := startRun(t, "--config", "example.yaml", "--store", storePath, "--no-tpm")
	fi, err := os.Stat(storePath + ".admin-token")
	if err != nil || fi.Mode().Perm() != 0o600 || rs.token == "" {
		t.Fatalf("generated token file: %v, %v (token %q)", fi, err, rs.token)
	}
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "Basic " + rs.token: 401, "Bearer " + rs.token: 200} {
		if got := adminStatus(t, rs.admin, auth); got != want {
			t.Errorf("generated token: Authorization %q: %d, want %d", auth, got, want)
		}
	}
	rs.stop()

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs = startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-token-file", tokenFile)
	if adminStatus(t, rs.admin, "") != 401 || adminStatus(t, rs.admin, "Bearer s3cret-token") != 200 {
		t.Error("--admin-token-file: token not required or not accepted")
	}
	rs.stop()

	rs = startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-insecure")
	if got := adminStatus(t, rs.admin, ""); got != 200 {
		t.Errorf("--admin-insecure: %d", got)
	}
	if !strings.Contains(rs.stderr.String(), "--admin-insecure: the admin API takes requests without a token") {
		t.Errorf("no warning for --admin-insecure:\n%s", rs.stderr.String())
	}
}
