// Package handover is the install and reset hand-over to the elemental
// toolkit (docs/architecture.md, the hand-over phase): the
// before-install/before-reset hook that carries the registration, the state
// and the network applicator into the new system's /oem even when the
// toolkit formats it, and the toolkit's run with upstream's environment.
package handover

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/protocol"
)

// HookPath is the hook's host path, in host.CloudInitDir
// (ELEMENTAL_CLOUD_INIT_PATHS: the toolkit runs the hooks it finds there),
// as upstream.
const HookPath = host.CloudInitDir + "/elemental-before-hook.yaml"

// Request is one hand-over.
type Request struct {
	// Reset: `elemental reset` (recovery); else `elemental install`.
	Reset bool
	// Elemental is the toolkit's executable (host.Lookup's answer).
	Elemental string
	// Config is the run's config: install or reset settings, cloud-config.
	Config *protocol.Config
	// Registration and State are the new system's registration config and
	// state file, as YAML.
	Registration, State []byte
	// SystemAgent are the system agent's files.
	SystemAgent *SystemAgent
	// Plan is the network config's plan (nil: none).
	Plan *apply.Plan
	// Files and Runner are the run's host edge.
	Files  host.FS
	Runner host.Runner
	Log    *logrus.Entry
	// Debug passes --debug to the toolkit; DisableBootEntry its
	// --disable-boot-entry setting; PersistOnly (a scratch --root) writes
	// the hook and the state but runs nothing.
	Debug, DisableBootEntry, PersistOnly bool
}

func (q *Request) verb() string {
	if q.Reset {
		return "reset"
	}
	return "install"
}

// Toolkit is the toolkit's run a written hook waits for (Prepare). The
// caller saves the state file on this machine between the two, so that a
// reset that reboots at its end does not lose the new registration.
type Toolkit struct {
	q   Request
	cmd host.Command
}

// Prepare writes the hook and returns the toolkit's run, not started.
func Prepare(q Request) (*Toolkit, error) {
	stage, oem := "before-install", oemDuringInstall
	if q.Reset {
		stage, oem = "before-reset", oemDuringReset
	}
	files, err := hookFiles(q)
	if err != nil {
		return nil, err
	}
	hook, err := finalizeHook(stage, oem, files)
	if err != nil {
		return nil, err
	}
	env, err := ToolkitEnv(q.Files, q.Reset, q.Config, q.DisableBootEntry)
	if err != nil {
		return nil, err
	}
	args := []string{}
	if q.Debug {
		args = append(args, "--debug")
	}
	if d := q.Config.Elemental.Install.ConfigDir; !q.Reset && d != "" {
		args = append(args, "--config-dir", d)
	}
	if err := q.Files.MkdirAll(path.Dir(HookPath), 0o700); err != nil {
		return nil, err
	}
	if err := q.Files.WriteFile(HookPath, hook, 0o600); err != nil {
		return nil, err
	}
	return &Toolkit{q: q, cmd: host.Command{Name: q.Elemental, Args: append(args, q.verb()), Env: env}}, nil
}

// Run runs the toolkit the hook was written for; under a scratch root
// (PersistOnly) it runs nothing.
func (t *Toolkit) Run(ctx context.Context) error {
	q := t.q
	log := logx.OrDiscard(q.Log)
	if q.PersistOnly {
		// A scratch root gets the hook and the state; the toolkit would
		// install or reset this very host.
		log.WithField("hook", HookPath).Warnf("not running %s: --root is not / (--apply-live runs it)", t.cmd)
		return nil
	}
	if _, err := q.Runner.Run(ctx, t.cmd); err != nil {
		return fmt.Errorf("elemental %s: %w", q.verb(), err)
	}
	if q.Reset {
		// The reset plan's trigger file (docs/protocol.md §8.4) has done its job.
		if err := q.Files.Remove(host.ResetCloudConfig); err != nil {
			log.WithError(err).Warn("removing the reset trigger")
		}
	}
	return nil
}

// hookFiles are the OEM files of the new system.
func hookFiles(q Request) ([]hookFile, error) {
	reg, err := initramfsFile("Include registration config into installed system", host.ConfigFile, q.Registration)
	if err != nil {
		return nil, err
	}
	st, err := initramfsFile("Include registration state into installed system", host.StateFile, q.State)
	if err != nil {
		return nil, err
	}
	cloud, err := CloudInit(q.Config.CloudConfig)
	if err != nil {
		return nil, err
	}
	agentYip, err := initramfsFiles("Elemental System Agent Configuration", q.SystemAgent.files)
	if err != nil {
		return nil, err
	}
	files := []hookFile{
		{name: "elemental-registration.yaml", content: reg},
		{name: "elemental-state.yaml", content: st},
		{name: "elemental-cloud-init.yaml", content: cloud},
		{name: "elemental-system-agent.yaml", content: agentYip},
	}
	if q.Plan == nil {
		return files, nil
	}
	// The applicator, the digested config and the manifest, exactly as a
	// first boot would persist them under /oem.
	persisted, err := q.Plan.Persisted()
	if err != nil {
		return nil, err
	}
	for _, f := range persisted {
		rel, ok := strings.CutPrefix(f.Path, "/oem/")
		if !ok {
			return nil, fmt.Errorf("hand-over: %s is not under /oem", f.Path)
		}
		files = append(files, hookFile{name: rel, content: f.Content})
	}
	return files, nil
}

// CloudInit renders the server's cloud-config as the toolkit reads it: a
// yip file when it has stages, else #cloud-config (docs/protocol.md §8.4).
func CloudInit(cc map[string]protocol.RawValue) ([]byte, error) {
	if len(cc) == 0 {
		return []byte{}, nil
	}
	plain := make(map[string]any, len(cc))
	for k, v := range cc {
		plain[k] = v.Value
	}
	b, err := yaml.Marshal(plain)
	if err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	if _, ok := cc["stages"]; ok {
		return b, nil
	}
	return append([]byte("#cloud-config\n"), b...), nil
}

// ToolkitEnv is the environment of `elemental install|reset` (docs/protocol.md
// 8.6); the install target is picked on the machine files reaches (its
// --root).
func ToolkitEnv(files host.FS, reset bool, cfg *protocol.Config, disableBootEntry bool) ([]string, error) {
	b := strconv.FormatBool
	env := []string{"ELEMENTAL_CLOUD_INIT_PATHS=" + host.CloudInitDir}
	if reset {
		rs := protocol.Reset{ResetPersistent: true, ResetOEM: true, Reboot: true}
		if cfg.Elemental.Reset != nil {
			rs = *cfg.Elemental.Reset
		}
		return append(env,
			"ELEMENTAL_RESET_SYSTEM="+rs.SystemURI,
			"ELEMENTAL_RESET_PERSISTENT="+b(rs.ResetPersistent),
			"ELEMENTAL_RESET_OEM="+b(rs.ResetOEM),
			"ELEMENTAL_RESET_DISABLE_BOOT_ENTRY="+b(rs.DisableBootEntry || disableBootEntry),
			"ELEMENTAL_POWEROFF="+b(rs.PowerOff),
			"ELEMENTAL_REBOOT="+b(rs.Reboot),
		), nil
	}
	in := cfg.Elemental.Install
	target, err := InstallDevice(files, in)
	if err != nil {
		return nil, &errclass.ConfigError{Err: err}
	}
	snapType, snapMax := "", ""
	if in.Snapshotter != nil {
		snapType = in.Snapshotter.Type
		if in.Snapshotter.MaxSnaps > 0 {
			snapMax = strconv.Itoa(in.Snapshotter.MaxSnaps)
		}
	}
	return append(env,
		"ELEMENTAL_INSTALL_TARGET="+target,
		"ELEMENTAL_INSTALL_SYSTEM="+in.SystemURI,
		"ELEMENTAL_INSTALL_FIRMWARE="+in.Firmware,
		"ELEMENTAL_INSTALL_ISO="+in.ISO,
		"ELEMENTAL_INSTALL_TTY="+in.TTY,
		"ELEMENTAL_INSTALL_DISABLE_BOOT_ENTRY="+b(in.DisableBootEntry || disableBootEntry),
		"ELEMENTAL_INSTALL_NO_FORMAT="+b(in.NoFormat),
		"ELEMENTAL_POWEROFF="+b(in.PowerOff),
		"ELEMENTAL_REBOOT="+b(in.Reboot),
		"ELEMENTAL_EJECT_CD="+b(in.EjectCD),
		"ELEMENTAL_SNAPSHOTTER_TYPE="+snapType,
		"ELEMENTAL_SNAPSHOTTER_MAX_SNAPS="+snapMax,
	), nil
}
