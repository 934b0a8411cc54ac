// Package agent owns the run: the phase list (phaseList; Phases lists it
// for a mode: config, state, identity, bootstrap, register, fetch-network,
// plan, then apply at boot or hand-over at install and reset, and finish),
// the modes, the retry policy and when the bootstrap network comes up and
// goes. The libraries it drives (protocol, tpm, apply, bootstrap,
// inventory, localconfig, handover) take the host edge (internal/host) as a
// value; systemd is reached through the Notifier interface
// (docs/architecture.md).
//
// A phase's signature says what it needs and what it hands on: each takes
// the products of earlier phases as arguments and returns its own
// (configured, prior, identity, registration, fetched, the plan, outcome;
// handoff.go), and phaseList binds them. The state file's content travels
// as a value, returned changed by the phase that changes it. The
// environment (env: options, clock, logger, notifier, host edge, tool
// table) is fixed when the run starts and only read after.
package agent
