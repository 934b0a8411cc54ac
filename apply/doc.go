// Package apply turns a protocol.NetworkConfig into the node's network, one
// job per file:
//
//   - render.go: placeholder substitution and validation on the parsed tree
//     (Render)
//   - plan.go, generate.go: NetworkManager keyfiles from the config itself or
//     from a KeyfileGenerator (nmstatectl gc, nm-configurator), the yip
//     applicator and the commands, without side effects (Plan)
//   - manifest.go, persist.go: the files the agent owns and their atomic
//     writing under /oem (Persist, Plan.Persisted)
//   - live_nmstate.go, live_keyfiles.go: the checkpointed live apply with a
//     way back (ApplyLive)
//   - reset.go: the removal of exactly what the agent wrote (ResetNetwork)
//   - keyfile.go: the one keyfile parser; yipfile.go: the applicator
//
// Every host path sits below the root of Applier.Files (a host.FS, the host
// edge); every file goes through it and every program through Runner, so
// tests use a scratch root and a dry run swaps in host.Print and
// host.PrintRunner.
package apply
