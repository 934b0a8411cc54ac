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
	f, err := localconfig.Read(e.files, e.o.ConfigPath, e.o.Overrides, ph.log)
	if err != nil {
		return nil, err
	}
	c := &configured{cfg: f.Config, nmstate: f.Nmstate}
	e.redact.learn(c.cfg)
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
	if c.labels, err = inventory.Labels(reg.Labels, e.path(e.o.LabelsFile), e.o.Labels); err != nil {
		return nil, &errclass.ConfigError{Err: err}
	}
	c.annotations = inventory.Annotations(inventory.AnnotationOptions{
		Files: e.files, RegVersion: e.o.Version, Auth: kind(reg, reg.Auth), NoToolkit: reg.NoToolkit,
	})
	if !strings.HasPrefix(reg.URL, "https://") {
		e.log.WithField("url", protocol.RedactURL(reg.URL)).Warn("registration URL is plain http: the conversation is neither encrypted nor authenticated")
	}
	// The inventory needs nothing from the server: collect it while the
	// TPM and the connection are being set up; PhaseRegister sends it.
	c.inv = collectInventory(ctx, inventory.Options{
		Files: e.files, NoSMBIOS: reg.NoSMBIOS,
		// The wait for it happens inside a connection's session, so it
		// gets half a session at most; a slow module is left out.
		Deadline: protocol.DefaultSessionDeadline / 2,
		Log:      e.log.WithField("phase", PhaseRegister).WithField("step", "inventory"),
	})
	return c, nil
}

// readState is PhaseState: the previous run's state file; install and
// reset forget the registration and the network config in it.
func (e *env) readState(ph *phase) (*prior, error) {
	st, note, err := loadState(e.files, e.o.StatePath)
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
		mac, err := inventory.MACAddress(e.files)
		if err != nil {
			return nil, errclass.Configf("auth mac: %w", err)
		}
		id.auth = protocol.Plain{AuthKind: kind(reg, localconfig.AuthMAC), ID: mac}
		plainIdentity(ph, localconfig.AuthMAC, mac)
	case localconfig.AuthSysUUID:
		u, err := inventory.SystemUUID(e.files)
		if err != nil {
			return nil, errclass.Configf("auth sys-uuid: %w", err)
		}
		id.auth = protocol.Plain{AuthKind: kind(reg, localconfig.AuthSysUUID), ID: u}
		plainIdentity(ph, localconfig.AuthSysUUID, u)
	case localconfig.AuthTPM:
		return id, e.openTPM(ph.log, reg, id)
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
// emulation settings in id.state.
func (e *env) openTPM(log *logrus.Entry, reg protocol.Registration, id *identity) error {
	opts := tpm.Options{Device: reg.TPMDevice, AKBlob: id.state.AKBlob(), Log: log,
		// A dry run writes nothing on the node, and a scratch root is not
		// this machine's install: neither may make keys persistent in the
		// machine's TPM.
		NoPersist: e.o.DryRun || e.o.PersistOnly,
	}
	if reg.EmulateTPM {
		uuid, _ := inventory.SystemUUID(e.files)
		opts.Emulate = true
		opts.Seed = tpm.ResolveSeed(true, reg.EmulatedTPMSeed, id.state.EmulatedTPM, id.state.EmulatedTPMSeed, uuid)
		fresh := !id.state.EmulatedTPM
		id.state.EmulatedTPM, id.state.EmulatedTPMSeed = true, opts.Seed
		if fresh && !e.o.DryRun {
			// The seed is the emulated TPM's identity, maybe drawn at
			// random: on disk before the server hears of it, so a power
			// cut before the run's end cannot make the next boot draw
			// another, a second inventory (docs/apply.md, crash consistency).
			if err := id.state.Save(e.files, e.o.StatePath); err != nil {
				return err
			}
		}
	} else {
		id.state.EmulatedTPM = false
		// A disk named as TPM would get TPM commands written into it.
		if err := devnode.CheckTPM(reg.TPMDevice); err != nil {
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
	e.log.WithField("tpm-hash", h).Info("TPM identity")
	return nil
}

// finish is PhaseFinish: the state saved (with the TPM's AK, which the
// run may have made) and systemd told the run is ready.
func (e *env) finish(st state.State, id *identity) error {
	if id.tpm != nil {
		st.SetAKBlob(id.tpm.AKBlob())
	}
	st.LastPhase = string(PhaseFinish)
	if err := st.Save(e.files, e.o.StatePath); err != nil {
		return err
	}
	e.notify.Ready()
	return nil
}
