package nic

import (
	"fmt"
	"net"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqPtr is struct ifreq with a pointer in its union, the form SIOCETHTOOL
// takes (ifr_data). The trailing pad covers the union's 24 bytes.
type ifreqPtr struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24]byte
}

// ethtoolPermAddr is struct ethtool_perm_addr with room for MAX_ADDR_LEN.
type ethtoolPermAddr struct {
	cmd  uint32
	size uint32
	data [32]byte
}

// Permanent asks the kernel for a NIC's permanent (burnt-in) address
// (ETHTOOL_GPERMADDR). Drivers without one (veth, most virtual devices)
// report zeros or length 0: that is an error.
func Permanent(ifname string) (net.HardwareAddr, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	req := &ethtoolPermAddr{cmd: unix.ETHTOOL_GPERMADDR, size: uint32(len(ethtoolPermAddr{}.data))}
	var ifr ifreqPtr
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(req)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(req)
	if errno != 0 {
		return nil, fmt.Errorf("ETHTOOL_GPERMADDR on %s: %w", ifname, errno)
	}
	if req.size == 0 || int(req.size) > len(req.data) || zero(req.data[:req.size]) {
		return nil, fmt.Errorf("ETHTOOL_GPERMADDR on %s: no permanent address", ifname)
	}
	return net.HardwareAddr(append([]byte(nil), req.data[:req.size]...)), nil
}
