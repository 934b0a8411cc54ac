// Package agent owns the run: phases in order (config, state, identity,
// inventory, register, network config, render, persist, apply, finish),
// the modes (boot, update, reset, dry-run), retries and exit codes. The
// libraries it drives (protocol, tpm, apply, inventory, systemd) know
// nothing of each other.
package agent
