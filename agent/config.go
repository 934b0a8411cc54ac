package agent

import "github.com/nodereg/nodereg/agent/localconfig"

// The local config file's names, from agent/localconfig (upstream's paths,
// docs/architecture.md), kept here for the callers that spell them so.
const (
	DefaultConfigPath = localconfig.DefaultConfigPath
	DefaultStatePath  = localconfig.DefaultStatePath
	DefaultLabelsFile = localconfig.DefaultLabelsFile
	InstallConfigPath = localconfig.InstallConfigPath
	InstallStatePath  = localconfig.InstallStatePath
	NmstateKey        = localconfig.NmstateKey

	networkModeAuto     = localconfig.NetworkAuto
	networkModeEmbedded = localconfig.NetworkEmbedded
	networkModeExplicit = localconfig.NetworkExplicit
	authTPM, authMAC    = localconfig.AuthTPM, localconfig.AuthMAC
	authSysUUID         = localconfig.AuthSysUUID
)

// Overrides are registration settings given on the command line
// (localconfig.Overrides).
type Overrides = localconfig.Overrides
