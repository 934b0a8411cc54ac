package handover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// disks puts /sys/block entries under root: name -> size in 512-byte
// sectors.
func disks(t *testing.T, root string, sizes map[string]string) {
	for name, sectors := range sizes {
		dir := filepath.Join(root, "sys/block", name)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "size"), []byte(sectors+"\n"), 0o444))
	}
}

// The install target is install.device when set, else the first disk by
// name that matches every selector rule; loop and ram devices never count.
func TestInstallDevicePicksTheFirstMatchingDisk(t *testing.T) {
	root := t.TempDir()
	// 10 GiB, 200 GiB, 200 GiB, and a 500 GiB loop device.
	disks(t, root, map[string]string{"sda": "20971520", "sdb": "419430400", "sdc": "419430400", "loop0": "1048576000"})
	files := host.Root(root)
	big := protocol.DeviceSelector{Key: "Size", Operator: "Gt", Values: []string{"100Gi"}}
	for _, c := range []struct {
		name string
		in   protocol.Install
		want string
		err  string
	}{
		{"device given", protocol.Install{Device: "/dev/vda", DeviceSelector: []protocol.DeviceSelector{big}}, "/dev/vda", ""},
		{"size", protocol.Install{DeviceSelector: []protocol.DeviceSelector{big}}, "/dev/sdb", ""},
		{"size, not sdb", protocol.Install{DeviceSelector: []protocol.DeviceSelector{big, {Key: "Name", Operator: "NotIn", Values: []string{"/dev/sdb"}}}}, "/dev/sdc", ""},
		{"none matches", protocol.Install{DeviceSelector: []protocol.DeviceSelector{{Key: "Size", Operator: "Gt", Values: []string{"1Ti"}}}}, "", "no disk among [sda sdb sdc]"},
		{"bad operator", protocol.Install{DeviceSelector: []protocol.DeviceSelector{{Key: "Name", Operator: "Gt", Values: []string{"sda"}}}}, "", `operator "Gt" does not apply to Name`},
	} {
		got, err := InstallDevice(files, c.in)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %q, %v; want %q, error containing %q", c.name, got, err, c.want, c.err)
		}
	}
}

// recorder is the toolkit: it keeps the commands and what the state file
// held when each ran.
type recorder struct {
	ran   []host.Command
	saved []bool
	state *bool
}

func (r *recorder) Run(_ context.Context, c host.Command) ([]byte, error) {
	r.ran = append(r.ran, c)
	r.saved = append(r.saved, *r.state)
	return nil, nil
}

// A reset writes the hook (its before-reset stage carries the registration
// and the state into /oem), saves the state, then runs `elemental reset`
// with upstream's environment and removes the reset trigger; a scratch
// root gets the hook and the state and runs nothing.
func TestRunWritesTheHookThenRunsTheToolkit(t *testing.T) {
	for _, persistOnly := range []bool{false, true} {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "oem"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, host.ResetCloudConfig), []byte("x\n"), 0o600))
		saved := false
		rec := &recorder{state: &saved}
		sa, err := SystemAgentFiles(&protocol.Config{}, "")
		must(t, err)
		tk, err := Prepare(Request{
			Reset: true, Elemental: "/usr/bin/elemental", Config: &protocol.Config{},
			Registration: []byte("elemental:\n  registration:\n    url: https://reg.example/r\n"), State: []byte("state: 1\n"),
			SystemAgent: sa, Files: host.Root(root), Runner: rec, PersistOnly: persistOnly,
		})
		must(t, err)
		if len(rec.ran) != 0 {
			t.Errorf("persist-only %v: Prepare ran %v: the toolkit must wait for the state", persistOnly, rec.ran)
		}
		saved = true // the caller's save, between the two
		must(t, tk.Run(t.Context()))
		hook, err := os.ReadFile(filepath.Join(root, HookPath))
		must(t, err)
		for _, want := range []string{"before-reset:", "path: /oem/elemental-registration.yaml", "path: /oem/elemental-state.yaml", "url: https://reg.example/r"} {
			if !strings.Contains(string(hook), want) {
				t.Errorf("persist-only %v: hook lacks %q:\n%s", persistOnly, want, hook)
			}
		}
		if !saved {
			t.Errorf("persist-only %v: state not saved", persistOnly)
		}
		_, trigger := os.Stat(filepath.Join(root, host.ResetCloudConfig))
		if persistOnly {
			if len(rec.ran) != 0 || trigger != nil {
				t.Errorf("scratch root: ran %v, trigger %v", rec.ran, trigger)
			}
			continue
		}
		if len(rec.ran) != 1 || !rec.saved[0] || !slices.Equal(rec.ran[0].Args, []string{"reset"}) ||
			!slices.Contains(rec.ran[0].Env, "ELEMENTAL_CLOUD_INIT_PATHS="+host.CloudInitDir) || !slices.Contains(rec.ran[0].Env, "ELEMENTAL_RESET_OEM=true") {
			t.Errorf("toolkit runs %+v (state saved before: %v), want one `elemental reset` after the state, with upstream's environment", rec.ran, rec.saved)
		}
		if !errors.Is(trigger, os.ErrNotExist) {
			t.Errorf("reset trigger left: %v", trigger)
		}
	}
}

// The hook writes only below the OEM mount: a name that would leave it is
// refused.
func TestFinalizeHookRefusesNamesOutsideOEM(t *testing.T) {
	for _, name := range []string{"../etc/shadow", "/etc/shadow", "a/../../b", ".hidden", ""} {
		if _, err := finalizeHook("before-install", oemDuringInstall, []hookFile{{name: name, content: []byte("x")}}); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	b, err := finalizeHook("before-install", oemDuringInstall, []hookFile{{name: "b.yaml"}, {name: "a/c.yaml"}})
	must(t, err)
	if i, j := strings.Index(string(b), "/run/elemental/oem/a/c.yaml"), strings.Index(string(b), "/run/elemental/oem/b.yaml"); i < 0 || j < i {
		t.Errorf("hook files not under the OEM mount in name order:\n%s", b)
	}
}
