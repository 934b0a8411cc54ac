package host

// The one table of the host paths the agent reads and writes, as host paths
// (below --root through FS). Upstream's where upstream has one, so an image
// keeps working when the binary is swapped (docs/protocol.md §8); the
// packages that use a path name it from here.
const (
	// The registration (agent/localconfig, agent's state file).
	ConfigFile        = "/oem/registration/config.yaml"
	StateFile         = "/oem/registration/state.yaml"
	LabelsFile        = "/etc/elemental/labels.yaml"
	InstallConfigFile = "/run/initramfs/live/livecd-cloud-config.yaml"
	InstallStateFile  = "/tmp/registration/state.yaml"
	// RuntimeConfigDropIns are drop-ins a cloud-config writes on any boot
	// medium, after config.d/ beside the config file (agent/localconfig,
	// docs/config.md).
	RuntimeConfigDropIns = "/run/nodereg/config.d"

	// The network config (apply): NetworkManager's persistent profiles,
	// the yip applicator (upstream's name, so upstream's reset removes it
	// too) and the agent's own directory under /oem.
	KeyfileDir = "/etc/NetworkManager/system-connections"
	Applicator = "/oem/elemental-network.yaml"
	StateDir   = "/oem/nodereg"
	// LibKeyfileDir is the profile directory NetworkManager loads after
	// RuntimeKeyfileDir and KeyfileDir, the distribution's (netpolicy).
	LibKeyfileDir = "/usr/lib/NetworkManager/system-connections"
	// CADir holds the rotated CAs (agent/catrust, docs/ca-rotation.md).
	CADir = StateDir + "/ca"

	// The bootstrap network (bootstrap): NetworkManager's runtime profiles,
	// gone at reboot, and the walk memory of a run that ran out of time.
	RuntimeKeyfileDir = "/run/NetworkManager/system-connections"
	BootstrapHeld     = "/run/nodereg/bootstrap-held.json"

	// The hand-over (agent/handover): where the toolkit finds the hook,
	// the reset plan's trigger, the OEM partition while a hook runs, the
	// system agent's files.
	CloudInitDir     = "/tmp/elemental/cloud-init"
	ResetCloudConfig = "/oem/reset-cloud-config.yaml"
	OEMDuringInstall = "/run/elemental/oem"
	OEMDuringReset   = "/oem"
	SystemAgentDir   = "/var/lib/elemental/agent"
	SystemAgentEtc   = "/etc/rancher/elemental/agent"

	// What the inventory, the identity and the bootstrap facts read.
	SysClassNet  = "/sys/class/net"
	SysBlock     = "/sys/block"
	SysCPU       = "/sys/devices/system/cpu"
	SysDRM       = "/sys/class/drm"
	DMIIDDir     = "/sys/class/dmi/id"
	DMITable     = "/sys/firmware/dmi/tables/DMI"
	DMIEntry     = "/sys/firmware/dmi/tables/smbios_entry_point"
	DevMem       = "/dev/mem" // dmidecode reads it when the kernel exports no DMITable
	ProcMeminfo  = "/proc/meminfo"
	ProcMounts   = "/proc/self/mounts"
	RunUdevData  = "/run/udev/data"
	SysMemory    = "/sys/devices/system/memory"
	SysHugepages = "/sys/kernel/mm/hugepages"
	VarLog       = "/var/log" // ghw's last resort for the physical memory: the kernel's boot line in syslog
	OSRelease    = "/etc/os-release"
	HostnameProc = "/proc/sys/kernel/hostname"
	HostnameFile = "/etc/hostname"

	// The TPM (tpm): the resource manager first, then the raw device.
	TPMDeviceRM  = "/dev/tpmrm0"
	TPMDeviceRaw = "/dev/tpm0"
)

// PCIIDs are where distributions put the PCI ID database, first found
// wins (the GPU names of the inventory).
var PCIIDs = [...]string{
	"/usr/share/hwdata/pci.ids",
	"/usr/share/misc/pci.ids",
	"/usr/share/hwdata/pci.ids.gz",
	"/usr/share/misc/pci.ids.gz",
}
