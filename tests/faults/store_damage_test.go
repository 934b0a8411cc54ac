package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/vectors"
	"github.com/nodereg/nodereg/protocol"
)

// Pool data only: these addresses are never configured anywhere.
var damageConfig = node.ServerConfig{
	Name: "dmg", Network: node.AddressOnlyTemplate(24),
	Pool: "10.214.0.10-10.214.0.250", Prefix: 24, Gateway: "10.214.0.1",
}.YAML()

// crashRE is what a Go panic or a runtime crash leaves on stderr.
var crashRE = regexp.MustCompile(`(?m)^(panic:|fatal error:|unexpected fault address|goroutine \d+ \[|SIGSEGV|SIGBUS)`)

// regserverRun is one regserver process on a (damaged) store: serving
// (rs), or refused at start (exit).
type regserverRun struct {
	rs   *labkit.Regserver
	exit *labkit.ExitedError
}

// startOn starts regserver on store and waits until it serves or exits.
// It does not wait for the admin API to answer: on a damaged store a
// request may fail, and the case sends its own.
func startOn(t *testing.T, cfg, store, token string) *regserverRun {
	t.Helper()
	rs, err := labkit.RegserverOptions{Args: []string{"--config", cfg, "--store", store, "--listen", "127.0.0.1:0", "--no-tpm",
		"--admin-listen", "127.0.0.1:0", "--admin-token-file", token}, ListenOnly: true}.Launch()
	var exit *labkit.ExitedError
	if errors.As(err, &exit) {
		return &regserverRun{exit: exit}
	}
	if err != nil {
		t.Fatalf("regserver on %s: %v", store, err)
	}
	t.Cleanup(rs.Kill)
	return &regserverRun{rs: rs}
}

// stderr is what the process wrote on stderr so far.
func (r *regserverRun) stderr() string {
	if r.exit != nil {
		return r.exit.Stderr
	}
	return r.rs.Stderr.String()
}

// exitCode is the status of a refused start, else the serving process's
// after SIGTERM (30 s at most, then SIGKILL and a failure).
func (r *regserverRun) exitCode(t *testing.T) int {
	t.Helper()
	if r.exit != nil {
		return r.exit.State.ExitCode()
	}
	if !r.rs.Stop(30 * time.Second) {
		t.Fatalf("regserver did not exit; stderr:\n%s", r.stderr())
	}
	return r.rs.Cmd.ProcessState.ExitCode()
}

func damageRegister(ctx context.Context, url, id string) error {
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url}, protocol.Plain{AuthKind: "mac", ID: id})
	if err != nil {
		return err
	}
	defer cc.Close()
	var smbios map[string]any
	if err := json.Unmarshal(damageSMBIOS, &smbios); err != nil {
		return err
	}
	smbios["System Information"].(map[string]any)["UUID"] = id
	var cfg protocol.Config
	_, err = cc.Register(ctx, &protocol.Payloads{SMBIOS: smbios, Annotations: map[string]string{"auth": "mac"}}, &cfg)
	return err
}

var damageSMBIOS []byte

// healthyStore registers machines on a new store, stops regserver and
// returns its binary (for store export).
func healthyStore(t *testing.T, cfg, token, path string, n int) string {
	t.Helper()
	r := startOn(t, cfg, path, token)
	if r.exit != nil {
		t.Fatalf("regserver on a new store did not start:\n%s", r.stderr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		node.Must(t, damageRegister(ctx, r.rs.URL("dmg-token"), fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i)))
	}
	if c := r.exitCode(t); c != 0 {
		t.Fatalf("healthy run exited %d:\n%s", c, r.stderr())
	}
	return r.rs.Bin
}

// damage writes a copy of src with one kind of damage chosen by rng.
func damage(t *testing.T, rng *rand.Rand, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	node.Must(t, err)
	var what string
	switch rng.IntN(3) {
	case 0: // cut on a page boundary, as a filled disk or a lost tail does
		n := 4096 * rng.IntN(len(b)/4096)
		b, what = b[:n], fmt.Sprintf("truncated to %d bytes", n)
	case 1: // cut anywhere
		n := rng.IntN(len(b))
		b, what = b[:n], fmt.Sprintf("truncated to %d bytes", n)
	default: // flipped bits, in the first pages (meta, freelist, roots) or anywhere
		k := 1 + rng.IntN(8)
		var at []int
		for range k {
			limit := len(b)
			if rng.IntN(2) == 0 {
				limit = min(len(b), 6*4096)
			}
			i := rng.IntN(limit)
			b[i] ^= 1 << rng.IntN(8)
			at = append(at, i)
		}
		what = fmt.Sprintf("bits flipped at %v", at)
	}
	node.Must(t, os.WriteFile(dst, b, 0o600))
	return what
}

// Truncated and bit-flipped copies of a real store, several seeds: regserver
// exits 78 naming the file, or serves (registrations answered, admin views
// and a graceful stop), and never panics; `store export` of each copy
// exports or refuses, and never panics either.
func TestDamagedStoreExits78OrServes(t *testing.T) {
	// Parallel: regserver processes of its own, beside the fault cases' waits.
	t.Parallel()
	copies := 60
	if testing.Short() {
		copies = 12
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(damageConfig), 0o600))
	token := filepath.Join(dir, "token")
	node.Must(t, os.WriteFile(token, []byte("damage-token-0123456789abcdef"), 0o600))
	damageSMBIOS = vectors.Read(t, "upstream-smbios.json")
	good := filepath.Join(dir, "good.db")
	bin := healthyStore(t, cfg, token, good, 40)

	counts := map[string]int{}
	for i := range copies {
		seed := uint64(i/15 + 1) // four seeds, 15 copies each
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		path := filepath.Join(dir, fmt.Sprintf("copy-%02d.db", i))
		what := damage(t, rng, good, path)
		outcome := checkDamagedRun(t, cfg, path, token)
		counts[outcome]++
		export := exec.Command(bin, "store", "export", "--store", path)
		var stderr strings.Builder
		export.Stdout, export.Stderr = io.Discard, &stderr
		err := export.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if crashRE.MatchString(stderr.String()) || (code != 0 && code != 1 && code != 78) {
			t.Errorf("copy %d (%s): store export exit %d:\n%s", i, what, code, stderr.String())
		}
		os.Remove(path)
	}
	t.Logf("%d damaged copies: %v", copies, counts)
	if counts["exit 78"] == 0 {
		t.Error("no damaged copy was refused: the damage did not reach the store")
	}
}

// checkDamagedRun starts regserver on one damaged copy and checks it.
func checkDamagedRun(t *testing.T, cfg, path, token string) string {
	t.Helper()
	r := startOn(t, cfg, path, token)
	if r.exit != nil {
		code := r.exitCode(t)
		msg := r.stderr()
		if code != 78 || crashRE.MatchString(msg) || !strings.Contains(msg, path) || !strings.Contains(msg, "is damaged") {
			t.Errorf("%s: exit %d, want 78 naming the file as damaged, no panic:\n%s", path, code, msg)
		}
		return "exit 78"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := r.rs.URL("dmg-token")
	for _, id := range []string{"4c4c4544-0000-4000-8000-000000000003", "4c4c4544-0000-4000-8000-999999999999"} {
		// A MsgError is fine (a damaged page fails that request); the
		// process must stay up.
		_ = damageRegister(ctx, url, id)
	}
	req, _ := http.NewRequest(http.MethodGet, r.rs.AdminBase()+"/admin/inventories", nil)
	req.Header.Set("Authorization", "Bearer damage-token-0123456789abcdef")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		var invs []struct{ Name string }
		_ = json.NewDecoder(resp.Body).Decode(&invs)
		resp.Body.Close()
		for _, inv := range invs {
			one, _ := http.NewRequest(http.MethodGet, r.rs.AdminBase()+"/admin/inventories/"+inv.Name, nil)
			one.Header.Set("Authorization", "Bearer damage-token-0123456789abcdef")
			if resp, err := http.DefaultClient.Do(one); err == nil {
				resp.Body.Close()
			}
		}
	}
	if r.rs.Exited() {
		t.Errorf("%s: regserver died while serving:\n%s", path, r.stderr())
		return "died"
	}
	code := r.exitCode(t)
	if code != 0 || crashRE.MatchString(r.stderr()) {
		t.Errorf("%s: served, then exit %d:\n%s", path, code, r.stderr())
	}
	return "served"
}
