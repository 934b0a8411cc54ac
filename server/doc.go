// Package server is the reference registration server (regserver): it
// routes registration URLs, runs each websocket registration through
// protocol.Accept, keeps inventories and IPAM claims in a file-backed store,
// and serves a read-only JSON admin view plus inventory deletion.
//
// Sub-packages each do one job: ipam (pools and lowest-free allocation),
// store (the one atomic state file), regconfig (the YAML config file),
// labeltmpl (${…} templates), tpmauth (TPM authentication, plugged in by the
// caller through Options.Auth).
package server
