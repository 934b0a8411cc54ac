// Package doccheck_test runs the command examples of the README, docs/ and
// examples/README.md that can run offline, as written (paths that would
// write outside a temp dir are pointed into one), and checks what the docs
// say they print. Every line of a ```sh block in those files must be run
// here or listed with the reason it is not, so a new example cannot go
// unchecked.
package doccheck_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// notRun: ```sh lines these tests do not run, and why.
var notRun = map[string]string{
	"make demo":    ".ci/run's demo stage runs it",
	"make package": ".ci/run's package stage runs it, and tests/package checks what it builds",
	// The README's quick start: what runs on the node or in the cluster.
	"dpkg -i bin/pkg/nodereg_*_amd64.deb":                                          "installs on this machine: tests/package installs the .deb with dpkg --root into a scratch root, alone and over elemental-register",
	"systemctl enable nodereg.service nodereg-update.timer nodereg-verify.service": "changes this machine's systemd: systemd/upstream_test.go enables nodereg's units in a scratch root with systemctl --root",
	"kubectl apply -f examples/rancher/inclusterippool.yaml -f examples/rancher/machineregistration.yaml -f examples/rancher/seedimage.yaml": "needs the reader's Rancher cluster; TestRancherExamples checks the files",
	"systemctl status nodereg-verify":       "on the node: the VM lab's guests run the units",
	"nodereg-agent verify":                  "on the node: cmd/agent's verify tests and the VM lab run it",
	"make test":                             "the test suite itself",
	"make test-boot":                        "a stage of make test",
	"make test-vm":                          ".ci/run's VM-lab stage runs it (tests/vm/ci-stage.sh)",
	"NODEREG_VM_REUSE_IMAGE=1 make test-vm": "boots guests for ten minutes: .ci/run's VM-lab stage",
	`make test-vm VM_CASES="B1 B7"`:         "boots guests for minutes: .ci/run's VM-lab stage runs every case",
	"make test-vm VM_CASES=B8":              "boots eight guests twice each: .ci/run's VM-lab stage runs two of its points",
	"tests/vm/ci-stage.sh":                  ".ci/run runs it as its VM-lab stage",
	"make test-boot BOOT_PARALLEL=1":        "a stage of make test, one case at a time",
	"make bench":                            "minutes of benchmarks; not a test",
	"make bench-short":                      "a minute of benchmarks: .ci/run's bench stage; not a test",
	"CGO_ENABLED=1 go run -tags emulatedtpm ./tests/bench -bin bin":                                     "what make bench runs",
	"bin/regserver --config regserver.yaml --listen 0.0.0.0:8080 --admin-listen :9090 --store state.db": "listens on every interface; TestAdminExample runs it on loopback",
	// docs/annotations.md's queries read the reader's own server's inventories.
	"curl -s -H \"Authorization: Bearer $ADMIN_TOKEN\" http://127.0.0.1:9090/admin/inventories |":                "queries the reader's server (with jq, below)",
	"jq '.[] | {name, state: .annotations[\"elemental.cattle.io/network-config.state\"],":                        "part of the query above",
	"error: .annotations[\"elemental.cattle.io/network-config.error\"]}'":                                        "part of the query above",
	"kubectl get machineinventory -A -o json | jq '.items[] | {name: .metadata.name,":                            "needs the reader's Rancher cluster",
	"state: .metadata.annotations[\"elemental.cattle.io/network-config.state\"]}'":                               "part of the kubectl query above",
	"curl -s -H \"$H\" -X DELETE http://127.0.0.1:9090/admin/inventories/m-4c4c4544-0042-3010-8058-b4c04f4e4e32": "names an inventory of the reader's server",
}

// docFiles are the files whose ```sh blocks are checked.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := testbin.ModuleRoot()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	node.Must(t, err)
	return append(files, filepath.Join(root, "README.md"), filepath.Join(root, "examples", "README.md"))
}

// shLines are the command lines of every ```sh block (comments and
// trailing "# ..." stripped).
func shLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	node.Must(t, err)
	var out []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```") && in:
			in = false
		case l == "```sh" || l == "```bash" || l == "```shell":
			in = true
		case in:
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
	}
	return out
}

// runHere: the ```sh lines the tests below run (each also through doc).
var runHere = map[string]bool{
	"NODEREG_SKIP_VM=1 make test-vm":            true,
	"go build -o bin/regserver ./cmd/regserver": true,
	"mkdir -p /var/lib/regserver":               true,
	"bin/regserver --config cmd/regserver/example.yaml --listen 127.0.0.1:0 --store /var/lib/regserver/state.db": true,
	`H="Authorization: Bearer $(cat state.db.admin-token)"`:                                                      true,
	`curl -s -H "$H" http://127.0.0.1:9090/admin/claims`:                                                         true,
}

// doc fails unless the doc file holds text verbatim.
func doc(t *testing.T, file, text string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), file))
	node.Must(t, err)
	if !strings.Contains(string(b), text) {
		t.Fatalf("%s no longer has %q: update this test with the doc", file, text)
	}
	return text
}

// sh runs a command line with bash in the module root, with bin/ of the
// doc replaced by a private bin directory.
func sh(t *testing.T, line string, env ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = testbin.ModuleRoot()
	cmd.Env = append(os.Environ(), env...)
	code, stdout, stderr := testutil.Run(t, cmd)
	return stdout, stderr, code
}

// bins is a directory with the built agent and regserver, named as the
// docs name them (make build's names).
func bins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p, name := range map[string]string{"./cmd/agent": "nodereg-agent", "./cmd/regserver": "regserver"} {
		node.Must(t, os.Symlink(testbin.Build(t, p), filepath.Join(dir, name)))
	}
	return dir
}

// docs/regserver.md "Running": build, make the store's directory, start
// (stdout: one "listening on" line), stop with SIGTERM (exit 0); then the
// Commands section's store export of that store.
func TestRegserverRunningExample(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	store := filepath.Join(tmp, "var-lib-regserver")
	fix := func(l string) string {
		l = strings.ReplaceAll(l, "/var/lib/regserver", store)
		return strings.ReplaceAll(l, "bin/regserver", bin+"/regserver")
	}
	build := doc(t, "docs/regserver.md", "go build -o bin/regserver ./cmd/regserver")
	if _, e, code := sh(t, fix(build), "CGO_ENABLED=0"); code != 0 {
		t.Fatalf("%s: exit %d\n%s", build, code, e)
	}
	mk := doc(t, "docs/regserver.md", "mkdir -p /var/lib/regserver")
	if _, e, code := sh(t, fix(mk)); code != 0 {
		t.Fatalf("%s: %s", mk, e)
	}
	run := doc(t, "docs/regserver.md", "bin/regserver --config cmd/regserver/example.yaml --listen 127.0.0.1:0 --store /var/lib/regserver/state.db")
	doc(t, "docs/regserver.md", "# stdout: listening on http://127.0.0.1:40321")
	args := strings.Fields(fix(run))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = testbin.ModuleRoot()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	node.Must(t, err)
	node.Must(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !regexp.MustCompile(`^listening on http://127\.0\.0\.1:[0-9]+\n$`).MatchString(line) {
		t.Fatalf("stdout %q, the doc says `listening on http://127.0.0.1:PORT`\n%s", line, errb.String())
	}
	node.Must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("regserver after SIGTERM: %v (the doc says exit 0)\n%s", err, errb.String())
	}
	doc(t, "docs/regserver.md", "regserver store export --store FILE")
	o, e, code := sh(t, bin+"/regserver store export --store "+store+"/state.db")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(o), &v) != nil {
		t.Fatalf("store export: exit %d, stdout not JSON: %q\n%s", code, o, e)
	}
}

// docs/regserver.md's admin example, on loopback instead of every
// interface: the token regserver generates beside the store opens the
// admin API (the H= line), GET /admin/claims answers JSON, and the same
// request without the token is refused.
func TestAdminExample(t *testing.T) {
	doc(t, "docs/regserver.md", "bin/regserver --config regserver.yaml --listen 0.0.0.0:8080 --admin-listen :9090 --store state.db")
	doc(t, "docs/regserver.md", `H="Authorization: Bearer $(cat state.db.admin-token)"`)
	get := doc(t, "docs/regserver.md", `curl -s -H "$H" http://127.0.0.1:9090/admin/claims`)
	b := bins(t)
	dir := t.TempDir()
	rs := labkit.RegserverOptions{Bin: filepath.Join(b, "regserver"), Args: []string{"--config", filepath.Join(testbin.ModuleRoot(), "examples", "regserver.yaml"),
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", filepath.Join(dir, "state.db")}}.Start(t)
	admin := rs.AdminBase()
	token, err := os.ReadFile(filepath.Join(dir, "state.db.admin-token"))
	node.Must(t, err)
	url := strings.Replace(strings.TrimPrefix(get, `curl -s -H "$H" `), "http://127.0.0.1:9090", admin, 1)
	get401, err := http.Get(url)
	node.Must(t, err)
	get401.Body.Close()
	if get401.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /admin/claims without the token: %d, the doc says every request needs it", get401.StatusCode)
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	node.Must(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	node.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var claims []any
	if resp.StatusCode != 200 || json.Unmarshal(body, &claims) != nil {
		t.Fatalf("GET /admin/claims: %d %s", resp.StatusCode, body)
	}
}

// docs/cli.md's synopsis, the commands that run offline: version, help,
// completion for each shell, inventory in each format (on the demo's VM
// fixture), render of an example.
func TestAgentSynopsis(t *testing.T) {
	b := bins(t)
	agent := filepath.Join(b, "nodereg-agent")
	root := filepath.Join(testbin.ModuleRoot(), "agent", "inventory", "testdata", "vm1")
	doc(t, "docs/cli.md", "nodereg-agent version                     print the version: semantic, from git describe, with the commit")
	doc(t, "docs/cli.md", "nodereg-agent help [command]")
	doc(t, "docs/cli.md", "nodereg-agent completion bash|zsh|fish|powershell")
	doc(t, "docs/cli.md", "nodereg-agent inventory [-f json|json-compact|yaml|labels]")
	doc(t, "docs/cli.md", "nodereg-agent render --input F")
	cases := [][]string{{"version"}, {"-v"}, {"--version"}, {"help"}, {"help", "render"}}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		cases = append(cases, []string{"completion", sh})
	}
	for _, f := range []string{"json", "json-compact", "yaml", "labels"} {
		cases = append(cases, []string{"inventory", "--root", root, "-f", f})
	}
	nc := filepath.Join(testbin.ModuleRoot(), "examples", "network", "nmconnections.yaml")
	// --network-config is render's old spelling, kept as a hidden alias.
	cases = append(cases, []string{"render", "--input", nc}, []string{"render", "-f", nc}, []string{"render", "--network-config", nc})
	for _, c := range cases {
		cmd := exec.Command(agent, c...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil || o.Len() == 0 {
			t.Errorf("nodereg-agent %s: %v, %d bytes of stdout\n%s", strings.Join(c, " "), err, o.Len(), e.String())
		}
	}
}

// examples/README.md's commands: render each NetworkConfig as written
// (bin/nodereg-agent), start regserver on the example config.
func TestExamplesReadme(t *testing.T) {
	b := bins(t)
	env := "PATH=" + b + ":" + os.Getenv("PATH")
	for _, f := range []string{"nmstate-single-nic", "nmstate-bond-vlan", "nmconnections", "nmstate-dual-stack"} {
		line := doc(t, "examples/README.md", "bin/nodereg-agent render --input examples/network/"+f+".yaml")
		o, e, code := sh(t, strings.Replace(line, "bin/nodereg-agent", "nodereg-agent", 1), env)
		if code != 0 || !strings.Contains(o, "# ---- keyfile:") {
			t.Errorf("%s: exit %d\n%s%s", line, code, o, e)
		}
	}
	line := doc(t, "examples/README.md", "bin/regserver --config examples/regserver.yaml --listen 127.0.0.1:0")
	args := strings.Fields(strings.Replace(line, "examples/", filepath.Join(testbin.ModuleRoot(), "examples")+"/", 1))
	labkit.RegserverOptions{Bin: filepath.Join(b, "regserver"), Args: append(args[1:], "--store", filepath.Join(t.TempDir(), "s.db"))}.Start(t)
	doc(t, "examples/README.md", "install -m 0644 examples/default/nodereg /etc/default/nodereg")
}

// docs/development.md: `export PATH="$(.ci/go-toolchain.sh):$PATH"` gives a
// PATH whose go is the one go.mod names (here the go running the tests is
// new enough, so nothing is fetched: GOPROXY=off proves it).
func TestGoToolchainLine(t *testing.T) {
	line := doc(t, "docs/development.md", `export PATH="$(.ci/go-toolchain.sh):$PATH"`)
	o, e, code := sh(t, line+" && go version", "GOPROXY=off")
	if code != 0 || !strings.HasPrefix(o, "go version go1.") {
		t.Fatalf("%s: exit %d, %q\n%s", line, code, o, e)
	}
}

// Every ```sh line is run by a test above or listed in notRun.
func TestEveryShellLineIsChecked(t *testing.T) {
	for _, f := range docFiles(t) {
		for _, l := range shLines(t, f) {
			if _, skip := notRun[l]; skip || runHere[l] {
				continue
			}
			t.Errorf("%s: `%s` is neither run by tests/doccheck nor listed in its notRun with a reason", filepath.Base(f), l)
		}
	}
	for l := range notRun {
		found := false
		for _, f := range docFiles(t) {
			for _, s := range shLines(t, f) {
				found = found || s == l
			}
		}
		if !found {
			t.Errorf("notRun lists `%s`, which no doc has any more", l)
		}
	}
}

// docs/vmlab.md: NODEREG_SKIP_VM=1 make test-vm says in one line that it
// skipped, and exits 0 (a developer's quick loop, never CI's).
func TestVMLabSkipLine(t *testing.T) {
	line := doc(t, "docs/vmlab.md", "NODEREG_SKIP_VM=1 make test-vm")
	o, e, code := sh(t, "make --no-print-directory test-vm", "NODEREG_SKIP_VM=1")
	lines := strings.Split(strings.TrimSpace(o), "\n")
	if code != 0 || len(lines) != 1 || !strings.Contains(strings.ToLower(lines[0]), "skip") {
		t.Fatalf("%s: exit %d, stdout %q (the doc says one line, exit 0)\n%s", line, code, o, e)
	}
}
