package apply

import (
	"github.com/nodereg/nodereg/netpolicy"
)

// checkPolicyState judges the rendered nmstate or nmc tree before any
// generator sees it (docs/reliability.md, network-config policy).
func (a *Applier) checkPolicyState(r *Rendered) error {
	if r.State == nil {
		return nil
	}
	return a.Policy.CheckState(r.State)
}

// checkPolicyKeyfiles judges the keyfiles a plan would write, whoever
// wrote them (the server's nmconnections, nmstatectl gc, the built-in
// translator, nmc), as NetworkManager will read them; a hand-over's also
// for autoconnect (Applier.HandOver).
func (a *Applier) checkPolicyKeyfiles(p *Plan) error {
	kfs := policyKeyfiles(p)
	if err := a.Policy.CheckKeyfiles(kfs); err != nil {
		return err
	}
	if err := netpolicy.CheckOneProfile(kfs); err != nil {
		return err
	}
	if a.HandOver {
		return netpolicy.CheckHandOverAutoconnect(kfs)
	}
	return nil
}

// checkPolicyForeign refuses a plan keyfile whose UUID or id a profile that
// is not ours already has, anywhere NetworkManager loads profiles from
// on the host. Ours: what the manifest (or the applicator) names, and the
// plan's own targets.
func (a *Applier) checkPolicyForeign(p *Plan, m manifestRead) error {
	owned, err := a.planOwned(p, m)
	if owned == nil {
		return err
	}
	for _, target := range p.targets() {
		owned[target] = true
	}
	foreign, err := a.Policy.Foreign(a.files(), func(hp string) bool { return owned[hp] })
	if err != nil {
		return err
	}
	return netpolicy.CheckForeign(policyKeyfiles(p), foreign)
}

func policyKeyfiles(p *Plan) []netpolicy.Keyfile {
	out := make([]netpolicy.Keyfile, len(p.Keyfiles))
	for i, kf := range p.Keyfiles {
		label := "config." + kf.Name
		if p.Generator != GeneratorNone {
			label = p.Generator + " output " + kf.Name
		}
		out[i] = netpolicy.Keyfile{Label: label, Name: kf.Name, Content: kf.Content}
	}
	return out
}
