// Package agent owns the run: the phases in order (Phases: config, state,
// identity, bootstrap, register, fetch-network, plan, then apply at boot or
// hand-over at install and reset, and finish), the modes, the retries and
// when the bootstrap network comes up and goes. The libraries it drives
// (protocol, tpm, apply, bootstrap, inventory, localconfig, handover) take
// the host edge (internal/host) as a value; systemd is reached through the
// Notifier interface (docs/architecture.md).
//
// A phase's signature says what it needs and what it hands on: register
// returns the server's reply, fetchNetwork takes it and returns the
// rendered network config, plan turns that into an apply.Plan, and apply or
// handOver consume both; each gets its *phase (name and tagged logger) from
// the runner. A run is its env (fixed at the start) and the state that
// spans the phases (config, state, identity, the inventory being
// collected, the bootstrap network).
package agent
