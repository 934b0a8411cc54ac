// Package agent owns the run: the phases in order (Phases: config, state,
// identity, register, fetch-network, plan, then apply at boot or hand-over
// at install and reset, and finish), the modes, the retries and the exit
// codes. The libraries it drives (protocol, tpm, apply, inventory) know
// nothing of each other; systemd is reached through the Notifier interface.
//
// A phase's signature says what it needs and what it hands on: register
// returns the server's reply, fetchNetwork takes it and returns the
// rendered network config, plan turns that into an apply.Plan, and apply or
// handOver consume both. Only what spans the whole run (config, state,
// identity, the inventory being collected) lives on the run struct.
package agent
