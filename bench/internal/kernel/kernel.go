// Package kernel reads the Linux kernel's counters that the benchmarks report beside their
// own: datagrams a full socket queue dropped, the host's UDP counters, and a process's CPU time.
// Elsewhere the counters read -1.
package kernel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ReadLines returns the lines of a file, without the last newline.
func ReadLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
}

// UDPDrops sums the datagrams dropped so far at the full receive queues of the IPv4 UDP
// sockets whose local address match takes (the last column of /proc/net/udp); -1 when the
// table cannot be read.
func UDPDrops(match func(netip.AddrPort) bool) int64 {
	lines, err := ReadLines("/proc/net/udp")
	if err != nil || len(lines) < 2 {
		return -1
	}
	var total int64
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 13 {
			continue
		}
		if a, err := ParseHexAddr(f[1]); err != nil || !match(a) {
			continue
		}
		v, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		total += v
	}
	return total
}

// ParseHexAddr parses /proc/net/udp's local_address: the IPv4 address in host byte order
// (little endian here) and the port, in hex.
func ParseHexAddr(s string) (netip.AddrPort, error) {
	var ip uint32
	var port uint16
	if _, err := fmt.Sscanf(s, "%08X:%04X", &ip, &port); err != nil {
		return netip.AddrPort{}, err
	}
	var a [4]byte
	binary.LittleEndian.PutUint32(a[:], ip)
	return netip.AddrPortFrom(netip.AddrFrom4(a), port), nil
}

// UDPCounter is one of the host's UDP counters in /proc/net/snmp (InDatagrams, RcvbufErrors,
// ...), or -1.
func UDPCounter(name string) int64 {
	lines, _ := ReadLines("/proc/net/snmp")
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "Udp: ") && strings.HasPrefix(lines[i+1], "Udp: ") {
			names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j := range names {
				if names[j] == name && j < len(vals) {
					v, _ := strconv.ParseInt(vals[j], 10, 64)
					return v
				}
			}
		}
	}
	return -1
}

// ProcCPU reads /proc/PID/stat (pid "self" for this process): the process's state ("R",
// "S", "Z", …) and the CPU time it spent in user and in system mode, in clock ticks
// (USER_HZ, 100 on Linux).
func ProcCPU(pid string) (state string, user, sys int64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, 0, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return "", 0, 0, fmt.Errorf("/proc/%s/stat: %d fields after the command name", pid, len(f))
	}
	user, _ = strconv.ParseInt(f[11], 10, 64)
	sys, _ = strconv.ParseInt(f[12], 10, 64)
	return f[0], user, sys, nil
}
