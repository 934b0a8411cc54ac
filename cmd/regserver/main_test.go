package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink the server writes from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started is a regserver run in this process.
type started struct {
	base, admin string
	stderr      *syncBuffer
	stop        func() int
}

// startRun runs regserver with args plus an admin listener on loopback and
// waits for its address lines.
func startRun(t *testing.T, args ...string) *started {
	t.Helper()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	st := &started{stderr: &syncBuffer{}}
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
	go io.Copy(io.Discard, br)
	return st
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
	resp, err = http.Get(rs.admin + "/admin/pools")
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
	if c := run(context.Background(), []string{"store", "export"}, io.Discard, io.Discard); c != exitUsage {
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

func TestRunUsageAndVersion(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown flag":   {"--nope"},
		"extra argument": {"--config", "example.yaml", "serve"},
	} {
		var stderr strings.Builder
		if c := run(context.Background(), args, io.Discard, &stderr); c != exitUsage {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", name, c, exitUsage, stderr.String())
		}
	}
	var stdout strings.Builder
	if c := run(context.Background(), []string{"--version"}, &stdout, io.Discard); c != exitOK || strings.TrimSpace(stdout.String()) != version {
		t.Fatalf("--version: exit %d, stdout %q", c, stdout.String())
	}
}

// docs/regserver.md's flag table and --help agree on every flag and default.
func TestDocsAgreeWithHelp(t *testing.T) {
	doc, err := os.ReadFile("../../docs/regserver.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // flag -> default column
	rowRE := regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^|]*\\|([^|]*)\\|")
	for _, m := range rowRE.FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	var f flags
	fs := newFlagSet(&f, io.Discard)
	fs.VisitAll(func(fl *flag.Flag) {
		col, ok := rows[fl.Name]
		switch {
		case !ok:
			t.Errorf("--%s is not in docs/regserver.md's flag table", fl.Name)
		case fl.DefValue == "" || fl.DefValue == "false" && col == "false":
		case col != "`"+fl.DefValue+"`":
			t.Errorf("--%s: docs say default %s, --help says %q", fl.Name, col, fl.DefValue)
		}
		delete(rows, fl.Name)
	})
	for name := range rows {
		t.Errorf("docs/regserver.md lists --%s, which regserver does not have", name)
	}
}

// writeCert writes a self-signed certificate valid from nb to na and its key.
func writeCert(t *testing.T, dir, name string, nb, na time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regserver.test"},
		DNSNames: []string{"regserver.test"}, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, filepath.Join(dir, name+".crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, filepath.Join(dir, name+".key"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	return certFile, keyFile
}
