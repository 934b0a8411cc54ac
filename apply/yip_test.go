package apply

import (
	"bytes"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mudler/yip/pkg/executor"
	"github.com/mudler/yip/pkg/plugins"
	"github.com/mudler/yip/pkg/schema"
	"github.com/sirupsen/logrus"
	"github.com/twpayne/go-vfs/v4"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// rootConsole runs yip's `if` and `commands` in the scratch root, so the
// applicator's guards see the boot mode the test set up and the root's
// /oem, as they would in Elemental's chrooted initramfs stage.
type rootConsole struct {
	root string
}

// Run runs cmd chrooted into the scratch root (node.ChrootRun).
func (c rootConsole) Run(cmd string, opts ...func(*exec.Cmd)) (string, error) {
	if err := node.PrepareShellRoot(c.root); err != nil {
		return "", err
	}
	return node.ChrootRun(c.root, cmd, opts...)
}

func (c rootConsole) Start(cmd *exec.Cmd, opts ...func(*exec.Cmd)) error {
	for _, o := range opts {
		o(cmd)
	}
	return cmd.Run()
}

func (c rootConsole) RunTemplate(st []string, template string) error {
	for _, s := range st {
		if _, err := c.Run(strings.ReplaceAll(template, "%s", s)); err != nil {
			return err
		}
	}
	return nil
}

func needNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: yip chowns files to 0:0 and the test bind-mounts /run in a private mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux) for a private mount namespace")
	}
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a mount namespace here: %v %s", err, out)
	}
}

// runInitramfs runs the initramfs stage over <root>/oem with mudler/yip's
// executor, configured like Elemental's runner: only the node and if
// conditionals.
func runInitramfs(t *testing.T, root string) {
	t.Helper()
	l := logrus.New()
	l.SetOutput(io.Discard)
	ex := executor.NewExecutor(executor.WithLogger(l),
		executor.WithConditionals(plugins.NodeConditional, plugins.IfConditional))
	fs := vfs.NewPathFS(vfs.OSFS, root)
	if err := ex.Run("initramfs", fs, rootConsole{root: root}, "/oem"); err != nil {
		t.Fatalf("yip initramfs: %v", err)
	}
}

func bootRoot(t *testing.T, mode string) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run/elemental"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "run/elemental/"+mode, "1", 0o644)
	return root
}

// The applicator, run by yip's real executor, writes the keyfiles gc produced,
// 0600, in active and recovery boots, and nothing on the live ISO.
func TestApplicatorUnderYip(t *testing.T) {
	needNamespaces(t)
	r, err := Render(loadVector(t))
	if err != nil {
		t.Fatal(err)
	}
	want := gcKeyfiles(t, r.Digested)
	if len(want) != 1 || !strings.Contains(want["enp1s0.nmconnection"], "address0=192.168.122.150/24") {
		t.Fatalf("stand-in gc gave %v", want)
	}
	for _, mode := range []string{"active_mode", "passive_mode", "recovery_mode", "live_mode"} {
		t.Run(mode, func(t *testing.T) {
			root := bootRoot(t, mode)
			stub := newStub(t)
			a := stub.applier(root)
			if err := a.Persist(mustPlan(t, a, r)); err != nil {
				t.Fatalf("Persist: %v", err)
			}
			runInitramfs(t, root)
			dir := filepath.Join(root, "etc/NetworkManager/system-connections")
			if mode == "live_mode" {
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Fatalf("live ISO boot got keyfiles: %v", err)
				}
				return
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(want) {
				t.Errorf("keyfile dir has %d entries, want %d", len(entries), len(want))
			}
			for name, content := range want {
				p := filepath.Join(dir, name)
				st, err := os.Stat(p)
				if err != nil {
					t.Fatalf("keyfile %s: %v", name, err)
				}
				if st.Mode().Perm() != 0o600 {
					t.Errorf("%s mode %v, want 0600", name, st.Mode().Perm())
				}
				if got := readFile(t, root, "etc/NetworkManager/system-connections/"+name); got != content {
					t.Errorf("%s content:\n%s\nwant:\n%s", name, got, content)
				}
			}
			if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o755 {
				t.Errorf("keyfile dir mode: %v %v", st.Mode(), err)
			}
			// A second boot rewrites the same bytes; other stages do nothing.
			runInitramfs(t, root)
			l := logrus.New()
			l.SetOutput(io.Discard)
			ex := executor.NewExecutor(executor.WithLogger(l), executor.WithConditionals(plugins.NodeConditional, plugins.IfConditional))
			if err := ex.Run("boot", vfs.NewPathFS(vfs.OSFS, root), rootConsole{root: root}, "/oem"); err != nil {
				t.Errorf("boot stage: %v", err)
			}
		})
	}
}

// Template delimiters in generated content reach the node literally, never
// executed by yip's text/template.
func TestApplicatorNeutralisesTemplates(t *testing.T) {
	needNamespaces(t)
	// Each file is rendered on its own; a valid template would be executed,
	// a broken one falls back to the raw text, so test both kinds.
	contents := map[string]string{
		"valid.nmconnection":  "[connection]\nid=x {{ .Values.os.name }}\ntype=ethernet\n",
		"printf.nmconnection": "[connection]\nid={{ printf \"%s\" \"y\" }}\ntype=ethernet\n",
		"broken.nmconnection": "[connection]\nid=x {{ bad syntax }} {{{ }}\ntype=ethernet\n",
	}
	var kfs []Keyfile
	for _, name := range slices.Sorted(maps.Keys(contents)) {
		kfs = append(kfs, Keyfile{Name: name, Content: []byte(contents[name])})
	}
	y, err := buildApplicator("/etc/NetworkManager/system-connections", kfs)
	if err != nil {
		t.Fatal(err)
	}
	root := bootRoot(t, "active_mode")
	writeFile(t, root, "oem/elemental-network.yaml", string(y), 0o600)
	runInitramfs(t, root)
	for name, content := range contents {
		if got := readFile(t, root, "etc/NetworkManager/system-connections/"+name); got != content {
			t.Errorf("%s after yip:\n%q\nwant\n%q", name, got, content)
		}
	}
}

// nmconnections keyfiles survive yip unchanged too.
func TestApplicatorNmconnectionsUnderYip(t *testing.T) {
	needNamespaces(t)
	r := renderNmconnections(t, "192.168.122.10")
	root := bootRoot(t, "recovery_mode")
	a := &Applier{Files: host.Root(root)}
	p := mustPlan(t, a, r)
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	runInitramfs(t, root)
	got := readFile(t, root, "etc/NetworkManager/system-connections/eth0.nmconnection")
	if !bytes.Equal([]byte(got), r.Keyfiles[0].Content) || !strings.Contains(got, "address1=192.168.122.10/24,") {
		t.Errorf("keyfile after yip:\n%s", got)
	}
}

// An applicator torn by a power cut (a prefix of it, where a rename is not
// atomic) may still parse as yip: its step must write nothing, or the node
// would boot a truncated profile. The whole one writes the keyfile.
func TestTornApplicatorWritesNothing(t *testing.T) {
	needNamespaces(t)
	r := renderNmconnections(t, "192.168.122.10")
	root := bootRoot(t, "active_mode")
	a := &Applier{Files: host.Root(root)}
	p := mustPlan(t, a, r)
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	whole := readFile(t, root, applicatorPath)
	cut := strings.Index(whole, "address1=") + len("address1=19")
	for _, torn := range []string{whole[:cut], strings.TrimSuffix(whole, "\n"), whole[:len(whole)-len(applicatorEnd)-1]} {
		writeFile(t, root, applicatorPath, torn, 0o600)
		var y schema.YipConfig
		if err := yaml.Unmarshal([]byte(torn), &y); err != nil || len(y.Stages["initramfs"]) != 1 {
			t.Fatalf("the torn applicator does not parse as one step (%v): the case tests nothing", err)
		}
		runInitramfs(t, root)
		if _, err := os.Stat(filepath.Join(root, keyfileDirRel, "eth0.nmconnection")); err == nil {
			t.Errorf("a torn applicator wrote a keyfile:\n%s", torn)
		}
	}
	writeFile(t, root, applicatorPath, whole, 0o600)
	runInitramfs(t, root)
	if got := readFile(t, root, keyfileDirRel+"/eth0.nmconnection"); got != string(r.Keyfiles[0].Content) {
		t.Errorf("the whole applicator wrote:\n%s", got)
	}
}
