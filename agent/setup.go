package agent

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/internal/devnode"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// loadConfig is PhaseConfig: the local config, the labels and annotations
// sent with every registration, and the inventory collection started.
func (e *env) loadConfig(ctx context.Context, ph *phase) (*configured, error) {
	f, err := localconfig.Read(ph.files, e.o.ConfigPath, e.o.Overrides, ph.log)
	if err != nil {
		return nil, err
	}
	c := &configured{cfg: f.Config, nmstate: f.Nmstate}
	if c.boot, err = f.Bootstrap(); err != nil {
		return nil, err
	}
	if c.netPolicy, err = f.NetPolicy(); err != nil {
		return nil, err
	}
	if err := e.checkModeTools(c.cfg); err != nil {
		return nil, err
	}
	c.apply = e.ownedApplier(c.nmstate, c.netPolicy)
	reg := c.cfg.Elemental.Registration
	// Labels and the annotations that do not depend on the connection are
	// read once per run, not once per attempt.
	if c.labels, err = inventory.Labels(ph.files, reg.Labels, e.o.LabelsFile, e.o.Labels); err != nil {
		return nil, &errclass.ConfigError{Err: err}
	}
	c.annotations = inventory.Annotations(inventory.AnnotationOptions{
		Files: ph.files, RegVersion: e.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit,
	})
	if !strings.HasPrefix(reg.URL, "https://") {
		ph.log.WithField("url", protocol.RedactURL(reg.URL)).Warn("registration URL is plain http: the conversation is neither encrypted nor authenticated")
	}
	// The inventory needs nothing from the server: collect it while the
	// TPM and the connection are being set up; PhaseRegister sends it.
	c.inv = collectInventory(ctx, inventory.Options{
		Files: ph.files, NoSMBIOS: reg.NoSMBIOS, Runner: ph.runner,
		Dmidecode: e.tools.Dmidecode, NoDmidecode: e.tools.NoDmidecode,
		// The wait for it happens inside a connection's session, so it
		// gets half a session at most; a slow module is left out.
		Deadline: protocol.DefaultSessionDeadline / 2,
		Log:      ph.log.WithField("step", "inventory"),
	})
	return c, nil
}

// readState is PhaseState: the previous run's state file; install and
// reset forget the registration and the network config in it.
func (e *env) readState(ph *phase) (*prior, error) {
	st, note, err := loadState(ph.files, e.o.StatePath)
	if err != nil {
		return nil, err
	}
	switch {
	case note == state.NoteFirstRegistration:
		// Every machine's first boot: nothing to warn about.
		ph.log.Info(note)
	case note != "":
		ph.log.Warn(note)
	}
	if st.LastPhase != "" && st.LastPhase != string(PhaseFinish) {
		// Saved at the hand-over: this is the first run after an install
		// or a reset, or the toolkit did not come back.
		ph.log.WithField("last-phase", st.LastPhase).Info("the previous run ended at its hand-over to the toolkit")
	}
	p := &prior{state: *st, appliedDigest: st.NetworkDigest}
	if e.o.Mode != ModeBoot {
		// Install and reset register as new (upstream starts from an empty
		// state); the TPM's cached AK and emulated seed are identity, kept.
		p.state.InitialRegistration = time.Time{}
		p.state.NetworkDigest, p.state.NetworkState, p.state.NetworkAddresses = "", "", ""
	}
	return p, nil
}

// identify is PhaseIdentity: the TPM (auth tpm), or the MAC or SMBIOS UUID
// a PLAIN authentication sends. An identity whose TPM opened comes back
// even on a later failure, so the run closes it.
func (e *env) identify(ph *phase, c *configured, p *prior) (*identity, error) {
	reg := c.cfg.Elemental.Registration
	id := &identity{state: p.state}
	switch reg.Auth {
	case localconfig.AuthMAC:
		mac, err := inventory.MACAddress(ph.files)
		if err != nil {
			return nil, errclass.Configf("auth mac: %w", err)
		}
		id.auth = protocol.Plain{AuthKind: kind(reg, localconfig.AuthMAC), ID: mac}
		plainIdentity(ph, localconfig.AuthMAC, mac)
	case localconfig.AuthSysUUID:
		u, err := inventory.SystemUUID(ph.files)
		if err != nil {
			return nil, errclass.Configf("auth sys-uuid: %w", err)
		}
		id.auth = protocol.Plain{AuthKind: kind(reg, localconfig.AuthSysUUID), ID: u}
		plainIdentity(ph, localconfig.AuthSysUUID, u)
	case localconfig.AuthTPM:
		return id, e.openTPM(ph, reg, id)
	}
	return id, nil
}

// plainIdentity logs what a PLAIN run sends, as the TPM's hash is logged:
// the MAC or UUID, and the machine hash the server's log lines name.
func plainIdentity(ph *phase, auth, id string) {
	ph.log.WithFields(logrus.Fields{auth: id, "machine": protocol.PlainHash(id)}).Info("PLAIN identity")
}

// kind is the auth annotation: upstream says emulated-tpm whenever
// emulation is on, whatever the auth (docs/protocol.md §4.2).
func kind(reg protocol.Registration, k string) string {
	if reg.EmulateTPM {
		return "emulated-tpm"
	}
	return k
}

// openTPM opens the TPM into id: its authenticator and hash, and the
// emulation settings in id.state (id.seedDrawn: a new seed to save).
func (e *env) openTPM(ph *phase, reg protocol.Registration, id *identity) error {
	opts := tpm.Options{Files: e.devices, Device: reg.TPMDevice, AKBlob: id.state.AKBlob(), Log: ph.log,
		// A dry run writes nothing on the node, and a scratch root is not
		// this machine's install: neither may make keys persistent in the
		// machine's TPM.
		NoPersist: e.o.DryRun || e.o.PersistOnly,
	}
	if reg.EmulateTPM {
		uuid, _ := inventory.SystemUUID(ph.files)
		opts.Emulate = true
		opts.Seed = tpm.ResolveSeed(true, reg.EmulatedTPMSeed, id.state.EmulatedTPM, id.state.EmulatedTPMSeed, uuid)
		// The seed is the emulated TPM's identity, maybe drawn at random:
		// the runner saves it when this phase ends, before the server
		// hears of it. A dry run writes nothing.
		id.seedDrawn = !id.state.EmulatedTPM && !e.o.DryRun
		id.state.EmulatedTPM, id.state.EmulatedTPMSeed = true, opts.Seed
	} else {
		id.state.EmulatedTPM = false
		// A disk named as TPM would get TPM commands written into it.
		if err := devnode.CheckTPM(e.devices, reg.TPMDevice); err != nil {
			return &errclass.ConfigError{Err: err}
		}
	}
	t, err := tpm.Open(opts)
	if err != nil {
		// A TPM that is missing, or an emulation this binary lacks, needs
		// a person; a busy TPM may free up.
		if errors.Is(err, tpm.ErrEmulationNotBuilt) || errors.Is(err, tpm.ErrNoDevice) || errors.Is(err, tpm.ErrBadSeed) {
			return &errclass.ConfigError{Err: err}
		}
		return err
	}
	id.tpm = t
	id.auth = t.Authenticator()
	h, err := t.Hash()
	if err != nil {
		return err
	}
	id.hash = h
	ph.log.WithField("tpm-hash", h).Info("TPM identity")
	return nil
}

// finalState is PhaseFinish's product: the state the run ends with, with
// the TPM's AK (which the run may have made); the runner saves it, then
// tells systemd the run is ready.
func finalState(st state.State, id *identity) *state.State {
	st = withAK(st, id)
	st.LastPhase = string(PhaseFinish)
	return &st
}

// withAK is st with the AK of id's TPM, if it has one.
func withAK(st state.State, id *identity) state.State {
	if id != nil && id.tpm != nil {
		st.SetAKBlob(id.tpm.AKBlob())
	}
	return st
}
