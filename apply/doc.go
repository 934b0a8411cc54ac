// Package apply turns a protocol.NetworkConfig into the node's network:
// placeholder substitution and validation on the parsed tree (Render),
// NetworkManager keyfiles from nmstatectl gc or from the config itself
// (Plan), a yip applicator under /oem that re-creates the keyfiles at every
// boot (Persist), a checkpointed live apply with a way back (ApplyLive) and
// the removal of exactly what the agent wrote (ResetNetwork). Every host path
// sits under Applier.Root and every external program runs through a Runner,
// so tests and dry-run use a scratch root and a printer.
package apply
