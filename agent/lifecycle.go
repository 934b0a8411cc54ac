package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/protocol"
)

// Mode selects what a run does with the rendered network config.
type Mode int

const (
	// ModeBoot persists and applies it live (the boot service).
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
	systemAgentDir   = "/var/lib/elemental/agent"
	systemAgentEtc   = "/etc/rancher/elemental/agent"
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
func (r *run) handOver(ctx context.Context, net *fetched, plan *apply.Plan) error {
	stage, oem, verb := "before-reset", apply.OEMDuringReset, "reset"
	if r.o.Mode == ModeInstall {
		stage, oem, verb = "before-install", apply.OEMDuringInstall, "install"
	}
	if r.o.Mode == ModeInstall && r.cfg.Elemental.Registration.NoToolkit {
		return r.writeSystemAgentFiles()
	}
	elemental, err := apply.Lookup("elemental", apply.ToolsFromEnv(os.Getenv).Elemental)
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
	hook, err := apply.FinalizeHook(stage, oem, files)
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
	cmd := apply.Command{Name: elemental, Args: append(args, verb), Env: env}
	hookPath := r.path(path.Join(cloudInitDir, hookFileName))
	if r.o.DryRun {
		fmt.Fprintf(r.o.Out, "# ---- %s hook: %s (0600)\n%s", verb, hookPath, hook)
		fmt.Fprintf(r.o.Out, "# ---- command\n%s\n", cmd)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(hookPath), 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(hookPath, hook, 0o600); err != nil {
		return err
	}
	if err := r.state.Save(r.path(r.o.StatePath)); err != nil {
		return err
	}
	runner := r.o.Runner
	if runner == nil {
		runner = apply.ExecRunner{}
	}
	if _, err := runner.Run(ctx, cmd); err != nil {
		return fmt.Errorf("elemental %s: %w", verb, err)
	}
	if r.o.Mode == ModeReset {
		// The reset plan's trigger file (PROTOCOL.md 8.7) has done its job.
		if err := os.Remove(r.path(resetCloudConfig)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.WithError(err).Warn("removing the reset trigger")
		}
	}
	return nil
}

// hookFiles are the OEM files of the new system.
func (r *run) hookFiles(plan *apply.Plan) ([]apply.HookFile, error) {
	regYAML, err := yaml.Marshal(map[string]any{"elemental": map[string]any{"registration": r.cfg.Elemental.Registration}})
	if err != nil {
		return nil, err
	}
	reg, err := apply.InitramfsFile("Include registration config into installed system", DefaultConfigPath, regYAML)
	if err != nil {
		return nil, err
	}
	stYAML, err := yaml.Marshal(r.state)
	if err != nil {
		return nil, err
	}
	st, err := apply.InitramfsFile("Include registration state into installed system", DefaultStatePath, stYAML)
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
	agentYip, err := systemAgentYip(agentFiles)
	if err != nil {
		return nil, err
	}
	files := []apply.HookFile{
		{Name: "elemental-registration.yaml", Content: reg},
		{Name: "elemental-state.yaml", Content: st},
		{Name: "elemental-cloud-init.yaml", Content: cloud},
		{Name: "elemental-system-agent.yaml", Content: agentYip},
	}
	if plan != nil {
		netFiles, err := r.stagedNetworkFiles(plan)
		if err != nil {
			return nil, err
		}
		files = append(files, netFiles...)
	}
	return files, nil
}

// stagedNetworkFiles persists the plan into a scratch root and carries what
// landed under its /oem: the applicator, the digested config and the
// manifest, exactly as a boot would have written them.
func (r *run) stagedNetworkFiles(plan *apply.Plan) ([]apply.HookFile, error) {
	stage, err := os.MkdirTemp("", "nodereg-stage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	a := &apply.Applier{Root: stage, Log: r.log}
	if err := a.Persist(plan); err != nil {
		return nil, err
	}
	var files []apply.HookFile
	oem := filepath.Join(stage, "oem")
	err = filepath.WalkDir(oem, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(oem, p)
		files = append(files, apply.HookFile{Name: filepath.ToSlash(rel), Content: b})
		return nil
	})
	return files, err
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

type agentFile struct {
	path    string
	content []byte
}

// systemAgentFiles are the three files of elemental-system-agent
// (PROTOCOL.md 8.6). They carry the system-agent token: never logged.
func (r *run) systemAgentFiles() ([]agentFile, error) {
	sa := r.cfg.Elemental.SystemAgent
	kubeconfig := map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters":        []any{map[string]any{"name": "cluster", "cluster": map[string]any{"server": sa.URL, "certificate-authority-data": caData(r.cfg.Elemental.Registration.CACert)}}},
		"users":           []any{map[string]any{"name": "user", "user": map[string]any{"token": sa.Token}}},
		"contexts":        []any{map[string]any{"name": "context", "context": map[string]any{"cluster": "cluster", "user": "user", "namespace": sa.SecretNamespace}}},
		"current-context": "context",
	}
	kc, err := yaml.Marshal(kubeconfig)
	if err != nil {
		return nil, err
	}
	conn, err := json.Marshal(map[string]string{"kubeConfig": string(kc), "namespace": sa.SecretNamespace, "secretName": sa.SecretName})
	if err != nil {
		return nil, err
	}
	cfg := "workDirectory: " + systemAgentDir + "/work\nlocalPlanDirectory: " + systemAgentDir + "/plans\n" +
		"appliedPlanDirectory: " + systemAgentDir + "/applied\nremoteEnabled: true\n" +
		"connectionInfoFile: " + systemAgentDir + "/elemental_connection.json\n"
	return []agentFile{
		{systemAgentDir + "/elemental_connection.json", conn},
		{systemAgentEtc + "/envs", []byte("CATTLE_AGENT_STRICT_VERIFY=\"" + strconv.FormatBool(sa.StrictTLSMode) + "\"")},
		{systemAgentEtc + "/config.yaml", []byte(cfg)},
	}, nil
}

func caData(ca string) string {
	if ca == "" {
		return ""
	}
	pemText := ca
	if !strings.Contains(ca, "-----BEGIN") {
		if b, err := os.ReadFile(ca); err == nil {
			pemText = string(b)
		}
	}
	return base64.StdEncoding.EncodeToString([]byte(pemText))
}

func systemAgentYip(files []agentFile) ([]byte, error) {
	m := make(map[string][]byte, len(files))
	for _, f := range files {
		m[f.path] = f.content
	}
	return apply.InitramfsFiles("Elemental System Agent Configuration", m)
}

// writeSystemAgentFiles is install with no-toolkit: the node is not an
// elemental-toolkit image, so the system agent's files are written now.
func (r *run) writeSystemAgentFiles() error {
	files, err := r.systemAgentFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		p := r.path(f.path)
		if r.o.DryRun {
			fmt.Fprintf(r.o.Out, "# would write %s (0600)\n", p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := atomicfile.Write(p, f.content, 0o600); err != nil {
			return err
		}
	}
	return nil
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
	target, err := installDevice(r.o.Root, in)
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

// formatAddresses is the report-back annotation value:
// "eth0=10.0.0.5/24,fd00::5/64;eth1=…", sorted.
func formatAddresses(m map[string][]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+strings.Join(m[k], ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// ResetNetwork removes the network config this agent wrote (the files in
// its manifest and the applicator, nothing else) and forgets its digest, so
// the next boot applies the server's config afresh.
func ResetNetwork(ctx context.Context, o Options) error {
	r := newRun(o)
	a := r.applier()
	if err := a.ResetNetwork(ctx); err != nil {
		return &PhaseError{Phase: PhaseApply, Err: err}
	}
	if o.DryRun {
		return nil
	}
	statePath := r.path(r.o.StatePath)
	st, note, err := LoadState(statePath)
	if err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	if note != "" || st.NetworkDigest == "" {
		return nil
	}
	st.NetworkDigest, st.NetworkState, st.NetworkAddresses = "", "", ""
	if err := st.Save(statePath); err != nil {
		return &PhaseError{Phase: PhaseState, Err: err}
	}
	return nil
}

// DumpInventory collects the inventory, labels and annotations the agent
// would send and returns them as JSON, with no secret in it (upstream's
// dumpdata).
func DumpInventory(ctx context.Context, o Options) ([]byte, error) {
	r := newRun(o)
	cfg, err := LoadConfig(r.path(r.o.ConfigPath), r.o.Overrides)
	if err != nil {
		// The inventory does not need a server: dump without the config.
		cfg = &protocol.Config{}
	}
	inv, err := inventory.Collect(ctx, inventory.Options{Root: r.o.Root, Log: r.log})
	if err != nil {
		return nil, err
	}
	labels, err := inventory.Labels(cfg.Elemental.Registration.Labels, r.path(r.o.LabelsFile), r.o.Labels)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	reg := cfg.Elemental.Registration
	ann := inventory.Annotations(inventory.AnnotationOptions{Root: r.o.Root, RegVersion: r.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit})
	return inventory.Dump(inv, labels, ann)
}
