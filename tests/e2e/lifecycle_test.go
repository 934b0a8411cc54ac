package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/nodereg/nodereg/internal/testutil"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/systemd"
)

// notifyListener is a unixgram NOTIFY_SOCKET, as systemd gives a Type=notify
// service. stop returns every datagram sent before it was called.
func notifyListener(t *testing.T) (stop func() []string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	testutil.Must(t, err)
	t.Setenv("NOTIFY_SOCKET", sock)
	const end = "TEST-END"
	msgs := make(chan []string, 1)
	go func() {
		var got []string
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil || string(buf[:n]) == end {
				msgs <- got
				return
			}
			got = append(got, string(buf[:n]))
		}
	}()
	return func() []string {
		defer conn.Close()
		// The agent's datagrams are queued before this marker (sendto
		// returned before Run did): reading up to it reads them all.
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
		testutil.Must(t, err)
		defer c.Close()
		_, err = c.Write([]byte(end))
		testutil.Must(t, err)
		select {
		case m := <-msgs:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("notify socket: the end marker never arrived")
			return nil
		}
	}
}

func TestNotifySocketSeesPhasesWaitAndReady(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), time.Second)
	m := newMachine(t, "52:54:00:00:40:01", rs.url())
	stop := notifyListener(t)
	res, err := m.run(func(o *agent.Options) { o.Notifier = systemd.New(testutil.TestLog(t)) })
	msgs := stop()
	if err != nil || !res.Applied {
		t.Fatalf("run: %+v %v", res, err)
	}
	joined := strings.Join(msgs, "\n")
	// Every phase of the list shows in STATUS, in the list's order.
	var started []agent.Phase
	for _, m := range msgs {
		if p, ok := strings.CutPrefix(m, "STATUS="); ok && strings.HasSuffix(p, ": started") {
			started = append(started, agent.Phase(strings.TrimSuffix(p, ": started")))
		}
	}
	if want := agent.Phases(agent.ModeBoot); !slices.Equal(started, want) {
		t.Errorf("phases started %q, want %q", started, want)
	}
	if !strings.Contains(joined, "EXTEND_TIMEOUT_USEC=") {
		t.Errorf("no EXTEND_TIMEOUT_USEC while addresses were pending: %q", msgs)
	}
	if len(msgs) == 0 || !strings.HasPrefix(msgs[len(msgs)-1], "READY=1") {
		t.Errorf("READY=1 is not the last message: %q", msgs)
	}
}

// An inventory deleted on the server: the update fails with a clear
// re-provisioning error, exit 78, after one attempt.
func TestDeletedInventoryNeedsReprovisioning(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:41:01", rs.url())
	res, err := m.run(nil)
	testutil.Must(t, err)
	deleteInventory(t, rs, res)
	_, err = m.run(nil)
	if code := exitcode.Of(err); code != exitcode.Config {
		t.Fatalf("exit %d (%v), want 78", code, err)
	}
	if !strings.Contains(err.Error(), "re-provisioning needed") || !strings.Contains(err.Error(), "attempt 1 failed, not retrying") {
		t.Errorf("error: %v", err)
	}
}

func deleteInventory(t *testing.T, rs *regServer, _ *agent.Result) {
	t.Helper()
	var inv []struct{ Name string }
	getJSON(t, rs.http.URL+"/admin/inventories", &inv)
	if len(inv) == 0 {
		t.Fatal("no inventory to delete")
	}
	req, _ := http.NewRequest(http.MethodDelete, rs.http.URL+"/admin/inventories/"+inv[0].Name, nil)
	resp, err := http.DefaultClient.Do(req)
	testutil.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("delete inventory: %s", resp.Status)
	}
}

// The addresses the node applied reach the server's admin view with the
// next update.
func TestAppliedAddressesAreReportedBack(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:42:01", rs.url())
	for i := 0; i < 2; i++ {
		if _, err := m.run(nil); err != nil {
			t.Fatal(err)
		}
	}
	var inv []struct{ Annotations map[string]string }
	getJSON(t, rs.http.URL+"/admin/inventories", &inv)
	if len(inv) != 1 {
		t.Fatalf("inventories: %+v", inv)
	}
	a := inv[0].Annotations
	if a["elemental.cattle.io/network-config.addresses"] != "enp1s0=192.168.122.150/24" || a["elemental.cattle.io/network-config.state"] != "applied" {
		t.Errorf("admin view annotations: %v", a)
	}
}

type elementalCall struct {
	Args  []string
	Verb  string
	Env   map[string]string
	Hooks map[string]string
}

func useStubElemental(t *testing.T, root string) func() []elementalCall {
	t.Helper()
	log := filepath.Join(t.TempDir(), "elemental.jsonl")
	t.Setenv("NODEREG_ELEMENTAL", testbin.Build(t, "./tests/stubs/elemental"))
	t.Setenv("ELEMENTAL_STUB_LOG", log)
	t.Setenv("ELEMENTAL_STUB_ROOT", root)
	return func() []elementalCall {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		testutil.Must(t, err)
		var out []elementalCall
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var c elementalCall
			testutil.Must(t, json.Unmarshal([]byte(line), &c))
			out = append(out, c)
		}
		return out
	}
}

// hookFiles decodes a finalize hook into OEM path -> content.
func hookFiles(t *testing.T, hook, stage string) map[string]string {
	t.Helper()
	var cfg struct {
		Name   string
		Stages map[string][]struct {
			Files []struct {
				Path        string
				Content     string
				Permissions int
			}
		}
	}
	testutil.Must(t, yaml.Unmarshal([]byte(hook), &cfg))
	if cfg.Name != "Elemental Finalize System" {
		t.Errorf("hook name %q", cfg.Name)
	}
	out := map[string]string{}
	for _, st := range cfg.Stages[stage] {
		for _, f := range st.Files {
			if f.Permissions != 0o600 {
				t.Errorf("%s: permissions %o", f.Path, f.Permissions)
			}
			out[f.Path] = f.Content
		}
	}
	return out
}

// Reset from recovery: the inventory was deleted, another machine took the
// freed address, `agent --reset` registers as new, gets what regserver now
// assigns, and the before-reset hook carries applicator, config and state.
func TestResetRegistersAsNewAndHandsOverThroughTheHook(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	a := newMachine(t, "52:54:00:00:43:01", rs.url())
	res, err := a.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Fatalf("first address %s", got)
	}
	deleteInventory(t, rs, res)
	b := newMachine(t, "52:54:00:00:43:02", rs.url())
	res, err = b.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Fatalf("freed address not reused: %s", got)
	}
	calls := useStubElemental(t, a.Root)
	res, err = a.run(func(o *agent.Options) { o.Mode = agent.ModeReset })
	if got := address(t, res, err); got != "192.168.122.151" || res.Updated {
		t.Fatalf("reset: %s updated=%v, want a new registration with 192.168.122.151", got, res.Updated)
	}
	cs := calls()
	if len(cs) != 1 || cs[0].Verb != "reset" {
		t.Fatalf("elemental calls: %+v", cs)
	}
	env := cs[0].Env
	for k, want := range map[string]string{
		"ELEMENTAL_CLOUD_INIT_PATHS": "/tmp/elemental/cloud-init", "ELEMENTAL_RESET_PERSISTENT": "true",
		"ELEMENTAL_RESET_OEM": "true", "ELEMENTAL_REBOOT": "true", "ELEMENTAL_POWEROFF": "false",
		"ELEMENTAL_RESET_DISABLE_BOOT_ENTRY": "false",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	hook := cs[0].Hooks["/tmp/elemental/cloud-init/elemental-before-hook.yaml"]
	files := hookFiles(t, hook, "before-reset")
	if !strings.Contains(files["/oem/elemental-network.yaml"], "192.168.122.151/24") {
		t.Errorf("hook applicator lacks the new address:\n%s", files["/oem/elemental-network.yaml"])
	}
	if !strings.Contains(files["/oem/elemental-registration.yaml"], rs.url()) {
		t.Errorf("hook registration config:\n%s", files["/oem/elemental-registration.yaml"])
	}
	if st := files["/oem/elemental-state.yaml"]; !strings.Contains(st, "initialRegistration") || !strings.Contains(st, "nodereg-network-digest") {
		t.Errorf("hook state:\n%s", st)
	}
	if _, ok := files["/oem/nodereg/network-manifest.json"]; !ok {
		t.Errorf("hook lacks the manifest: %v", slices.Sorted(maps.Keys(files)))
	}
	var claims = rs.claims()
	owners := map[string]int{}
	for _, c := range claims {
		owners[c.Address]++
	}
	if owners["192.168.122.150"] != 1 || owners["192.168.122.151"] != 1 {
		t.Errorf("server claims after reset: %+v", claims)
	}
}

// elemental-register's own command line, from an existing image, works
// unchanged: install without the toolkit writes the system agent's files.
func TestUpstreamCommandLineInstallNoToolkit(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:44:01", rs.url())
	cfg := filepath.Join(m.Root, "etc/elemental/config.yaml")
	testutil.Must(t, os.MkdirAll(filepath.Dir(cfg), 0o755))
	testutil.Must(t, os.WriteFile(cfg, []byte("elemental:\n  registration:\n    url: "+rs.url()+"\n    auth: mac\n"), 0o600))
	bin := testbin.Build(t, "./cmd/agent")
	link := filepath.Join(t.TempDir(), "elemental-register")
	testutil.Must(t, os.Symlink(bin, link))
	cmd := exec.Command(link, "--debug", "--config-path", "/etc/elemental/config.yaml", "--state-path", "/etc/elemental/state.yaml", "--install", "--no-toolkit", "--root", m.Root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("upstream command line: %v\n%s", err, out)
	}
	for _, p := range []string{"etc/elemental/state.yaml", "var/lib/elemental/agent/elemental_connection.json", "etc/rancher/elemental/agent/envs", "etc/rancher/elemental/agent/config.yaml"} {
		st, err := os.Stat(filepath.Join(m.Root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if p != "etc/elemental/state.yaml" && st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", p, st.Mode())
		}
	}
	if strings.Contains(string(out), "level=debug") == false {
		t.Error("--debug did not enable debug logging")
	}
}

// --reset-network removes only what the agent wrote, and the next boot
// applies the config again.
func TestResetNetworkRemovesOnlyOwnFiles(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:45:01", rs.url())
	if _, err := m.run(nil); err != nil {
		t.Fatal(err)
	}
	foreignKeyfile := filepath.Join(m.Root, "etc/NetworkManager/system-connections/foreign.nmconnection")
	foreignOEM := filepath.Join(m.Root, "oem/90_custom.yaml")
	testutil.Must(t, os.MkdirAll(filepath.Dir(foreignKeyfile), 0o755))
	testutil.Must(t, os.WriteFile(foreignKeyfile, []byte("[connection]\nid=foreign\n"), 0o600))
	testutil.Must(t, os.WriteFile(foreignOEM, []byte("name: custom\n"), 0o644))
	t.Setenv("NODEREG_NMCLI", "/bin/true")
	if err := agent.ResetNetwork(t.Context(), m.options(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Root, applicator)); !os.IsNotExist(err) {
		t.Errorf("applicator still there: %v", err)
	}
	for _, p := range []string{foreignKeyfile, foreignOEM} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("foreign file removed: %s", p)
		}
	}
	// /bin/true stood for the reset's nmcli only: the boot's run asks
	// NetworkManager, which a true that lists no profile is not.
	t.Setenv("NODEREG_NMCLI", "")
	res, err := m.run(nil)
	if err != nil || !res.Applied {
		t.Errorf("boot after reset-network: %+v %v, want the config applied again", res, err)
	}
}

func TestResetDryRunPrintsHookAndCommand(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:46:01", rs.url())
	calls := useStubElemental(t, m.Root)
	before := testutil.Tree(t, m.Root)
	// Nothing anywhere: not under the root, not in a scratch directory.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out strings.Builder
	_, err := m.run(func(o *agent.Options) { o.Mode = agent.ModeReset; o.DryRun = true; o.Out = &out })
	if err != nil {
		t.Fatal(err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m.Root)); d != "" {
		t.Error("reset dry run changed the root")
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("reset dry run wrote to the temp directory: %v", ents)
	}
	if len(calls()) != 0 {
		t.Error("reset dry run ran elemental")
	}
	for _, want := range []string{"elemental-before-hook.yaml", "Elemental Finalize System", "ELEMENTAL_RESET_OEM=true", " reset"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry-run output lacks %q", want)
		}
	}
}

// Install from live media: the install device is chosen by the selector,
// deterministically (first match by name), and the before-install hook
// writes into the OEM partition mounted at /run/elemental/oem.
func TestInstallPicksTheDiskDeterministically(t *testing.T) {
	cfg := strings.Replace(serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate),
		"    elemental:\n      registration:\n        auth: mac\n",
		"    elemental:\n      registration:\n        auth: mac\n      install:\n        device-selector:\n        - {key: Size, operator: Gt, values: [10Gi]}\n        - {key: Name, operator: NotIn, values: [/dev/vdc]}\n        reboot: true\n", 1)
	rs := startRegServer(t, cfg, 0)
	m := newMachine(t, "52:54:00:00:47:01", rs.url())
	for name, gib := range map[string]int{"sda": 5, "vdc": 40, "vdb": 20, "vda": 8, "loop0": 100} {
		d := filepath.Join(m.Root, "sys/block", name)
		testutil.Must(t, os.MkdirAll(d, 0o755))
		testutil.Must(t, os.WriteFile(filepath.Join(d, "size"), []byte(strconvItoa(gib<<21)+"\n"), 0o644))
	}
	calls := useStubElemental(t, m.Root)
	res, err := m.run(func(o *agent.Options) { o.Mode = agent.ModeInstall })
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Fatalf("install: %s", got)
	}
	cs := calls()
	if len(cs) != 1 || cs[0].Verb != "install" {
		t.Fatalf("elemental calls %+v", cs)
	}
	if got := cs[0].Env["ELEMENTAL_INSTALL_TARGET"]; got != "/dev/vdb" {
		t.Errorf("install target %q, want /dev/vdb (the only disk > 10Gi not excluded)", got)
	}
	if cs[0].Env["ELEMENTAL_REBOOT"] != "true" {
		t.Errorf("ELEMENTAL_REBOOT=%q", cs[0].Env["ELEMENTAL_REBOOT"])
	}
	files := hookFiles(t, cs[0].Hooks["/tmp/elemental/cloud-init/elemental-before-hook.yaml"], "before-install")
	if !strings.Contains(files["/run/elemental/oem/elemental-network.yaml"], "192.168.122.150/24") {
		t.Errorf("before-install hook lacks the applicator: %v", slices.Sorted(maps.Keys(files)))
	}
}

func strconvItoa(n int) string { return fmt.Sprint(n) }
