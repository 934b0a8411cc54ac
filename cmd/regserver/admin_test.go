package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
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

// A token file others may read is refused at start (78, naming the file
// and its mode); one of 0600, and 0400, is taken.
func TestAdminTokenFileModes(t *testing.T) {
	dir := t.TempDir()
	for mode, refused := range map[os.FileMode]bool{0o644: true, 0o640: true, 0o604: true, 0o600: false, 0o400: false} {
		p := filepath.Join(dir, fmt.Sprintf("token-%04o", mode))
		if err := os.WriteFile(p, []byte("s3cret-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if !refused {
			rs := startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-token-file", p)
			if adminStatus(t, rs.admin, "Bearer s3cret-token") != 200 {
				t.Errorf("%04o: the token is not accepted", mode)
			}
			rs.stop()
			continue
		}
		var stderr strings.Builder
		code := run(context.Background(), []string{"--config", "example.yaml", "--no-tpm", "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--admin-token-file", p}, io.Discard, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), p) || !strings.Contains(stderr.String(), fmt.Sprintf("mode %04o", mode)) {
			t.Errorf("%04o: exit %d, want 78 naming the file and its mode:\n%s", mode, code, stderr.String())
		}
	}
}

// An admin listener beyond loopback over plain http is served, with a
// warning at start that the token crosses the network in clear text (the
// address is data only: nothing binds it).
func TestAdminPlainHTTPBeyondLoopbackWarns(t *testing.T) {
	for _, c := range []struct {
		ip            string
		insecure, tls bool
		want          string
	}{
		{"10.0.0.1", false, false, "serves plain http: the admin token crosses the network in clear text"},
		{"10.0.0.1", true, true, "--admin-insecure is set"},
		{"10.0.0.1", false, true, ""},
		{"127.0.0.1", false, false, ""},
		{"::1", true, false, ""},
	} {
		var buf strings.Builder
		lg := logrus.New()
		lg.SetOutput(&buf)
		warnExposedAdmin(net.ParseIP(c.ip), c.ip+":9090", c.insecure, c.tls, logrus.NewEntry(lg))
		if got := buf.String(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: logged %q, want %q", c, got, c.want)
		}
	}
}
