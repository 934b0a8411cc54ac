package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

// started is a regserver run in this process.
type started struct {
	base, admin string
	token       string // the generated admin token
	stderr      *testutil.Log
	stop        func() int
}

// startRun runs regserver with args plus an admin listener on loopback and
// waits for its address lines.
func startRun(t *testing.T, args ...string) *started {
	t.Helper()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	st := &started{stderr: &testutil.Log{}}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append(args, "--listen", "127.0.0.1:0", "--admin-listen", ":0"), outW, st.stderr)
		outW.Close()
	}()
	stopped := false
	st.stop = func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		return <-code
	}
	t.Cleanup(func() { st.stop() })
	br := bufio.NewReader(outR)
	for _, re := range []struct {
		re  string
		dst *string
	}{{`^listening on (http://127\.0\.0\.1:\d+)\n$`, &st.base}, {`^admin listening on (http://127\.0\.0\.1:\d+)\n$`, &st.admin}} {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no address line: %v; stderr:\n%s", err, st.stderr.String())
		}
		m := regexp.MustCompile(re.re).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("address line %q", line)
		}
		*re.dst = m[1]
	}
	// Without --admin-token-file a token is generated and its file named.
	if !slices.Contains(args, "--admin-token-file") && !slices.Contains(args, "--admin-insecure") {
		line, err := br.ReadString('\n')
		m := regexp.MustCompile(`^admin token in (/\S+)\n$`).FindStringSubmatch(line)
		if err != nil || m == nil {
			t.Fatalf("token line %q, %v", line, err)
		}
		b, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatalf("admin token file: %v", err)
		}
		st.token = strings.TrimSpace(string(b))
	}
	go io.Copy(io.Discard, br)
	return st
}

// adminGet calls the admin API with the generated token.
func (st *started) adminGet(t *testing.T, client *http.Client, path string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, st.admin+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+st.token)
	return client.Do(req)
}

func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	storePath := filepath.Join(dir, "store.db")
	rs := startRun(t, "--config", "example.yaml", "--store", storePath, "--no-tpm")
	m := []string{"", rs.base}
	stderr := rs.stderr

	resp, err := http.Get(m[1] + "/elemental/registration/demo-token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "url: "+m[1]+"/elemental/registration/demo-token") {
		t.Fatalf("GET = %d\n%s", resp.StatusCode, body)
	}
	// The admin API is on its own listener only.
	if resp, err := http.Get(m[1] + "/admin/pools"); err != nil || resp.StatusCode == 200 {
		t.Fatalf("admin API on the registration listener: %v %v", resp, err)
	}
	resp, err = rs.adminGet(t, http.DefaultClient, "/admin/pools")
	if err != nil {
		t.Fatal(err)
	}
	var pools []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&pools)
	resp.Body.Close()
	if err != nil || len(pools) != 1 || pools[0]["free"] != float64(51) {
		t.Fatalf("pools = %v, %v", pools, err)
	}

	if c := rs.stop(); c != 0 {
		t.Fatalf("exit %d after stop; stderr:\n%s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "regserver stopped") {
		t.Errorf("no stop line in log:\n%s", stderr.String())
	}

	// The stopped server's store exports as JSON.
	var out, errOut strings.Builder
	if c := run(context.Background(), []string{"store", "export", "--store", storePath}, &out, &errOut); c != exitOK {
		t.Fatalf("store export: exit %d: %s", c, errOut.String())
	}
	var dump struct {
		Version     int            `json:"version"`
		Inventories map[string]any `json:"inventories"`
		Claims      []any          `json:"claims"`
	}
	if err := json.Unmarshal([]byte(out.String()), &dump); err != nil || dump.Version != 1 || dump.Inventories == nil || dump.Claims == nil {
		t.Fatalf("export %q: %v", out.String(), err)
	}
	if c := run(context.Background(), []string{"store", "export"}, io.Discard, io.Discard); c != cmdline.ExitUsage {
		t.Errorf("store export without --store: exit %d", c)
	}
}

func TestRunConfigErrorsExit78(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("registrations: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no config":      {},
		"invalid config": {"--config", bad},
		"missing config": {"--config", filepath.Join(dir, "nope.yaml")},
		"half TLS":       {"--config", "example.yaml", "--tls-cert", "x"},
	} {
		var stderr strings.Builder
		if c := run(context.Background(), args, io.Discard, &stderr); c != exitConfig {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", name, c, exitConfig, stderr.String())
		}
	}
}

// Without --config the line says what to pass and where an example is.
func TestRunWithoutConfigSaysWhatToPass(t *testing.T) {
	var stderr strings.Builder
	if c := run(context.Background(), nil, io.Discard, &stderr); c != exitConfig {
		t.Fatalf("exit %d, want %d", c, exitConfig)
	}
	for _, want := range []string{"--config is required", "registrations and IP pools", "--config cmd/regserver/example.yaml"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every refusal at start exits 78 and names the key (or flag) and cause.
func TestRunRefusesAtStart(t *testing.T) {
	dir := t.TempDir()
	example, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	overlap := writeFile(t, filepath.Join(dir, "overlap.yaml"), `
registrations: [{name: r, token: t}]
pools:
- {name: first, addresses: [10.8.0.10-10.8.0.11], prefix: 24}
- {name: second, addresses: [10.8.0.10-10.8.0.11], prefix: 24}
`)
	authTypo := writeFile(t, filepath.Join(dir, "auth.yaml"), strings.Replace(string(example), "auth: tpm", "auth: tmp", 1))
	if !strings.Contains(string(example), "auth: tpm") {
		t.Fatal("test bug: example.yaml has no auth: tpm")
	}
	empty := writeFile(t, filepath.Join(dir, "empty.db"), "")
	null := writeFile(t, filepath.Join(dir, "null.db"), "null\n")
	notDir := writeFile(t, filepath.Join(dir, "file"), "x")
	expiredCert, expiredKey := writeCert(t, dir, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	futureCert, futureKey := writeCert(t, dir, "future", time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	base := []string{"--config", "example.yaml", "--listen", "127.0.0.1:0", "--no-tpm"}
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"overlapping pools": {[]string{"--config", overlap, "--listen", "127.0.0.1:0"}, []string{`pool "second" overlaps pool "first"`, "10.8.0.10"}},
		"auth typo":         {[]string{"--config", authTypo, "--listen", "127.0.0.1:0"}, []string{"registration.auth", `"tmp"`}},
		"ftp external url":  {append(base, "--external-url", "ftp://x"), []string{"--external-url", "scheme must be http or https"}},
		"store dir missing": {append(base, "--store", "/proc/nope/x.db"), []string{"--store /proc/nope/x.db", "directory"}},
		"store dir a file":  {append(base, "--store", notDir+"/x.db"), []string{"--store " + notDir + "/x.db"}},
		"empty store":       {append(base, "--store", empty), []string{empty, "holds no state"}},
		"null store":        {append(base, "--store", null), []string{null, "holds no state"}},
		"expired cert":      {append(base, "--tls-cert", expiredCert, "--tls-key", expiredKey), []string{"--tls-cert", "expired", "valid from", " to "}},
		"future cert":       {append(base, "--tls-cert", futureCert, "--tls-key", futureKey), []string{"--tls-cert", "not yet valid", "valid from"}},
		"negative wait":     {append(base, "--network-wait", "-1s"), []string{"--network-wait"}},
	} {
		var stderr strings.Builder
		code := run(context.Background(), c.args, io.Discard, &stderr)
		if code != exitConfig {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", name, code, exitConfig, stderr.String())
			continue
		}
		got := strings.ReplaceAll(stderr.String(), `\"`, `"`) // logrus quotes messages
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: stderr does not contain %q:\n%s", name, w, stderr.String())
			}
		}
	}
	// The refused store files are left as they were.
	for _, p := range []string{empty, null} {
		if fi, err := os.Stat(p); err != nil || (p == empty && fi.Size() != 0) {
			t.Errorf("%s changed: %v", p, err)
		}
	}
}

// runCmd runs regserver's command line to its end (never one that serves).
func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// A command line regserver does not understand exits 64 with one line on
// stderr naming the problem and where to look, and nothing on stdout.
func TestCommandLinesNotUnderstoodExit64WithOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
		hint string
	}{
		{[]string{"--nope"}, "unknown flag: --nope", "regserver --help"},
		{[]string{"-config", "example.yaml"}, "unknown shorthand flag: 'c' in -config", "regserver --help"},
		{[]string{"--config", "example.yaml", "serve"}, `unknown command "serve" for "regserver"`, "regserver --help"},
		{[]string{"bogus"}, `unknown command "bogus" for "regserver"`, "regserver --help"},
		{[]string{"--confg", "example.yaml"}, "unknown flag: --confg; did you mean --config?", "regserver --help"},
		{[]string{"stroe"}, `unknown command "stroe" for "regserver"; did you mean store?`, "regserver --help"},
		{[]string{"store", "exprot"}, `unknown command "exprot" for "regserver store"; did you mean export?`, "regserver store --help"},
		{[]string{"completion", "foo"}, `unknown command "foo" for "regserver completion"`, "regserver completion --help"},
		{[]string{"--max-sessions", "many"}, `invalid argument "many" for "--max-sessions"`, "regserver --help"},
		{[]string{"--network-wait", "soon"}, `invalid argument "soon" for "--network-wait"`, "regserver --help"},
		{[]string{"--listen"}, "flag needs an argument: --listen", "regserver --help"},
		{[]string{"help", "bogus"}, `unknown help topic "bogus"`, "regserver help --help"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`, "regserver version --help"},
		{[]string{"version", "--config", "example.yaml"}, "unknown flag: --config", "regserver version --help"},
		{[]string{"store"}, "a command is required: export", "regserver store --help"},
		{[]string{"store", "import"}, `unknown command "import" for "regserver store"`, "regserver store --help"},
		{[]string{"store", "export"}, `required flag(s) "store" not set`, "regserver store export --help"},
		{[]string{"store", "export", "--store", "x.db", "extra"}, `unexpected argument "extra"`, "regserver store export --help"},
		{[]string{"store", "export", "--store", "x.db", "--listen", ":0"}, "unknown flag: --listen", "regserver store export --help"},
	} {
		code, stdout, stderr := runCmd(c.args...)
		if code != cmdline.ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", c.args, code, cmdline.ExitUsage, stderr)
			continue
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q, want nothing", c.args, stdout)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
			t.Errorf("%q: stderr is not one line:\n%s", c.args, stderr)
		}
		if !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "(see '"+c.hint+"')") {
			t.Errorf("%q: stderr %q does not say %q with the hint %q", c.args, stderr, c.says, c.hint)
		}
	}
}

// Help goes to stdout with exit 0: cobra's Usage, Available Commands and
// Flags sections, every command and the server's flags where they apply.
func TestHelpOnStdout(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"--help"}, []string{"Usage:", "regserver --config FILE [flags]", "regserver [command]", "Available Commands:",
			"store ", "version ", "help ", "completion ", "Flags:", "--config string", "--listen string",
			`(default "127.0.0.1:8080")`, "--store string", "bbolt database", "--network-wait duration", "(default 10s)",
			"--max-sessions int", "(default 128)", "--version", "Exit status: 0 stopped, 64 bad command line"},
			[]string{"state file", "Usage of"}},
		{[]string{"-h"}, []string{"Usage:", "Available Commands:", "Flags:"}, nil},
		{[]string{"help"}, []string{"Usage:", "Available Commands:", "Flags:"}, nil},
		{[]string{"help", "store"}, []string{"regserver store [command]", "Available Commands:", "export"}, nil},
		{[]string{"store", "--help"}, []string{"regserver store [command]", "Available Commands:", "export"}, []string{"--config"}},
		{[]string{"help", "store", "export"}, []string{"regserver store export --store FILE", "Flags:", "--store string", "read-only"}, []string{"--listen", "--config"}},
		{[]string{"store", "export", "--help"}, []string{"regserver store export --store FILE", "--store string"}, []string{"--listen", "--config"}},
		{[]string{"version", "--help"}, []string{"regserver version"}, []string{"--config"}},
		{[]string{"completion", "bash"}, []string{"bash completion", "regserver"}, nil},
	} {
		code, stdout, stderr := runCmd(c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", c.args, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%q: stdout does not contain %q:\n%s", c.args, w, stdout)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(stdout, w) {
				t.Errorf("%q: stdout contains %q:\n%s", c.args, w, stdout)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runCmd(args...)
		if code != 0 || stdout != version+"\n" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// writeCert writes a certificate for regserver.test valid from nb to na
// and its key.
func writeCert(t *testing.T, dir, name string, nb, na time.Time) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := testpki.New(t, name).IssueWindowPEM(t, nb, na, "regserver.test")
	certFile = writeFile(t, filepath.Join(dir, name+".crt"), string(certPEM))
	keyFile = writeFile(t, filepath.Join(dir, name+".key"), string(keyPEM))
	return certFile, keyFile
}
