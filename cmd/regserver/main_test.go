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
	"strings"
	"testing"
)

func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	storePath := filepath.Join(dir, "store.json")
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--config", "example.yaml", "--listen", "127.0.0.1:0", "--store", storePath, "--no-tpm"}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v; stderr:\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`^listening on (http://127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("address line %q", line)
	}
	go io.Copy(io.Discard, outR)

	resp, err := http.Get(m[1] + "/elemental/registration/demo-token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "url: "+m[1]+"/elemental/registration/demo-token") {
		t.Fatalf("GET = %d\n%s", resp.StatusCode, body)
	}
	resp, err = http.Get(m[1] + "/admin/pools")
	if err != nil {
		t.Fatal(err)
	}
	var pools []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&pools)
	resp.Body.Close()
	if err != nil || len(pools) != 1 || pools[0]["free"] != float64(51) {
		t.Fatalf("pools = %v, %v", pools, err)
	}

	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d after stop; stderr:\n%s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "regserver stopped") {
		t.Errorf("no stop line in log:\n%s", stderr.String())
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
