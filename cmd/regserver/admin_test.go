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
	"time"

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
	if err := os.WriteFile(tokenFile, []byte("s3cret-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs = startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-token-file", tokenFile)
	if adminStatus(t, rs.admin, "") != 401 || adminStatus(t, rs.admin, "Bearer s3cret-token-0123456789abcdef") != 200 {
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
		if err := os.WriteFile(p, []byte("s3cret-token-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if !refused {
			rs := startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-token-file", p)
			if adminStatus(t, rs.admin, "Bearer s3cret-token-0123456789abcdef") != 200 {
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

// TestAdminTokenFileOwnerAndContent: a 0600 token file another uid owns
// is refused (that user could rewrite the token and own the admin API from
// the next start), and so is content that is not one token of at least
// 128 bits: one character, too few hex digits or base64 characters, two
// lines (which no header can match), a space or a control character. Each
// refusal is 78 naming the file and the cause. The shortest strong tokens
// of each alphabet are taken (docs/reliability.md).
func TestAdminTokenFileOwnerAndContent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file to another uid")
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refuse := func(name, p, cause string) {
		t.Helper()
		var stderr strings.Builder
		// A token taken serves until the deadline (then exits 0): the
		// deadline only bounds that wrong outcome.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		code := run(ctx, []string{"--config", "example.yaml", "--no-tpm", "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--admin-token-file", p}, io.Discard, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), p) || !strings.Contains(stderr.String(), cause) {
			t.Errorf("%s: exit %d, want 78 naming %s and %q:\n%s", name, code, p, cause, stderr.String())
		}
	}
	foreign := write("foreign", strings.Repeat("ab", 20)+"\n")
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refuse("another uid's file", foreign, "owned by uid 65534")

	for name, c := range map[string]struct{ content, cause string }{
		"one character":   {"x\n", "fewer than 128"},
		"31 hex digits":   {strings.Repeat("a", 31), "use at least 32"},
		"38 digits":       {strings.Repeat("7", 38), "use at least 39"},
		"21 base64":       {strings.Repeat("Zq", 10) + "-", "use at least 22"},
		"two lines":       {strings.Repeat("ab", 20) + "\n" + strings.Repeat("cd", 20) + "\n", "more than one line"},
		"a space":         {strings.Repeat("ab", 20) + " x", `' '`},
		"an ESC":          {strings.Repeat("ab", 20) + "\x1b[2J", "character 41 is"},
		"a leading blank": {"\n" + strings.Repeat("ab", 20), "more than one line"},
		"empty":           {"", "empty"},
	} {
		refuse(name, write(strings.ReplaceAll(name, " ", "-"), c.content), c.cause)
	}

	for _, tok := range []string{strings.Repeat("0123456789abcdef", 2), strings.Repeat("9", 39), "AbCdEfGhIjKlMnOpQrStU_", "AbCdEfGhIjKlMnOpQrStU+/w=="} {
		p := write("good", tok+"\n")
		rs := startRun(t, "--config", "example.yaml", "--no-tpm", "--admin-token-file", p)
		if adminStatus(t, rs.admin, "Bearer "+tok) != 200 {
			t.Errorf("%q: a strong token is not accepted", tok)
		}
		rs.stop()
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
