package agent

import (
	"context"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// Mode selects what a run does with the network config once planned.
type Mode int

const (
	// ModeBoot applies it live and persists it (the boot service).
	ModeBoot Mode = iota
	// ModeReset hands it, with the registration, to `elemental reset`
	// through the before-reset hook (recovery).
	ModeReset
	// ModeInstall does the same for `elemental install` (live media).
	ModeInstall
)

const (
	cloudInitDir     = "/tmp/elemental/cloud-init"
	hookFileName     = "elemental-before-hook.yaml"
	resetCloudConfig = "/oem/reset-cloud-config.yaml"
)

// Network config states reported back to the server as annotations.
const (
	netStatePending = "pending"
	netStateReady   = "ready"
	netStateApplied = "applied"
)

// handOver writes the before-install/before-reset hook of PROTOCOL.md 8.7,
// so the registration config, the state and the network applicator land in
// the new system's /oem even when the toolkit formats it, then runs the
// toolkit with the environment of 8.6.
func (r *run) handOver(ctx context.Context, ph *phase, net *fetched, plan *apply.Plan) error {
	stage, oem, verb := "before-reset", oemDuringReset, "reset"
	if r.o.Mode == ModeInstall {
		stage, oem, verb = "before-install", oemDuringInstall, "install"
	}
	if r.o.Mode == ModeInstall && r.cfg.Elemental.Registration.NoToolkit {
		return r.writeSystemAgentFiles()
	}
	elemental, err := host.Lookup("elemental", host.ToolsFromEnv(os.Getenv).Elemental)
	if err != nil {
		return &ConfigError{Err: fmt.Errorf("%s needs the elemental toolkit: %w", verb, err)}
	}
	if plan != nil {
		r.state.NetworkDigest = r.result.Digest
		r.state.NetworkState = netStateReady
		r.state.NetworkAddresses = formatAddresses(apply.InterfaceAddresses(net.rendered))
	}
	// Upstream saves the state before the toolkit runs: a reset that
	// reboots at its end must not lose the new registration. The new
	// system gets the same state through the hook.
	r.state.LastPhase = PhaseHandOver
	files, err := r.hookFiles(plan)
	if err != nil {
		return err
	}
	hook, err := finalizeHook(stage, oem, files)
	if err != nil {
		return err
	}
	env, err := r.toolkitEnv()
	if err != nil {
		return err
	}
	args := []string{}
	if r.o.Debug {
		args = append(args, "--debug")
	}
	if d := r.cfg.Elemental.Install.ConfigDir; r.o.Mode == ModeInstall && d != "" {
		args = append(args, "--config-dir", d)
	}
	hookPath := path.Join(cloudInitDir, hookFileName)
	if err := r.files.MkdirAll(path.Dir(hookPath), 0o700); err != nil {
		return err
	}
	if err := r.files.WriteFile(hookPath, hook, 0o600); err != nil {
		return err
	}
	if err := r.state.Save(r.files, r.o.StatePath); err != nil {
		return err
	}
	cmd := host.Command{Name: elemental, Args: append(args, verb), Env: env}
	if r.o.PersistOnly && !r.o.DryRun {
		// A scratch root gets the hook and the state; the toolkit would
		// install or reset this very host.
		ph.log.WithField("hook", hookPath).Warnf("not running %s: --root is not / (--apply-live runs it)", cmd)
		return nil
	}
	if _, err := r.runner.Run(ctx, cmd); err != nil {
		return fmt.Errorf("elemental %s: %w", verb, err)
	}
	if r.o.Mode == ModeReset {
		// The reset plan's trigger file (PROTOCOL.md 8.7) has done its job.
		if err := r.files.Remove(resetCloudConfig); err != nil {
			r.log.WithError(err).Warn("removing the reset trigger")
		}
	}
	return nil
}

// hookFiles are the OEM files of the new system.
func (r *run) hookFiles(plan *apply.Plan) ([]hookFile, error) {
	regYAML, err := registrationYAML(r.cfg.Elemental.Registration, r.boot)
	if err != nil {
		return nil, err
	}
	reg, err := initramfsFile("Include registration config into installed system", DefaultConfigPath, regYAML)
	if err != nil {
		return nil, err
	}
	stYAML, err := yaml.Marshal(r.state)
	if err != nil {
		return nil, err
	}
	st, err := initramfsFile("Include registration state into installed system", DefaultStatePath, stYAML)
	if err != nil {
		return nil, err
	}
	cloud, err := cloudInit(r.cfg.CloudConfig)
	if err != nil {
		return nil, err
	}
	agentFiles, err := r.systemAgentFiles()
	if err != nil {
		return nil, err
	}
	agentYip, err := initramfsFiles("Elemental System Agent Configuration", agentFiles)
	if err != nil {
		return nil, err
	}
	files := []hookFile{
		{name: "elemental-registration.yaml", content: reg},
		{name: "elemental-state.yaml", content: st},
		{name: "elemental-cloud-init.yaml", content: cloud},
		{name: "elemental-system-agent.yaml", content: agentYip},
	}
	if plan == nil {
		return files, nil
	}
	// The applicator, the digested config and the manifest, exactly as a
	// first boot would persist them under /oem.
	persisted, err := plan.Persisted()
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

// cloudInit renders the server's cloud-config as the toolkit reads it: a
// yip file when it has stages, else #cloud-config (PROTOCOL.md 8.7).
func cloudInit(cc map[string]protocol.RawValue) ([]byte, error) {
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

// toolkitEnv is the environment of `elemental install|reset` (PROTOCOL.md 8.6).
func (r *run) toolkitEnv() ([]string, error) {
	b := strconv.FormatBool
	env := []string{"ELEMENTAL_CLOUD_INIT_PATHS=" + cloudInitDir}
	if r.o.Mode == ModeReset {
		rs := protocol.Reset{ResetPersistent: true, ResetOEM: true, Reboot: true}
		if r.cfg.Elemental.Reset != nil {
			rs = *r.cfg.Elemental.Reset
		}
		return append(env,
			"ELEMENTAL_RESET_SYSTEM="+rs.SystemURI,
			"ELEMENTAL_RESET_PERSISTENT="+b(rs.ResetPersistent),
			"ELEMENTAL_RESET_OEM="+b(rs.ResetOEM),
			"ELEMENTAL_RESET_DISABLE_BOOT_ENTRY="+b(rs.DisableBootEntry || r.o.DisableBootEntry),
			"ELEMENTAL_POWEROFF="+b(rs.PowerOff),
			"ELEMENTAL_REBOOT="+b(rs.Reboot),
		), nil
	}
	in := r.cfg.Elemental.Install
	target, err := installDevice(r.files, in)
	if err != nil {
		return nil, &ConfigError{Err: err}
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
		"ELEMENTAL_INSTALL_DISABLE_BOOT_ENTRY="+b(in.DisableBootEntry || r.o.DisableBootEntry),
		"ELEMENTAL_INSTALL_NO_FORMAT="+b(in.NoFormat),
		"ELEMENTAL_POWEROFF="+b(in.PowerOff),
		"ELEMENTAL_REBOOT="+b(in.Reboot),
		"ELEMENTAL_EJECT_CD="+b(in.EjectCD),
		"ELEMENTAL_SNAPSHOTTER_TYPE="+snapType,
		"ELEMENTAL_SNAPSHOTTER_MAX_SNAPS="+snapMax,
	), nil
}
