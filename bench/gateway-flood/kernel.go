package main

// The kernel's counters of datagrams it dropped.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// udpDrops is how many datagrams the full receive queue of the UDP socket bound to ap has
// dropped so far (the last column of /proc/net/udp), or -1.
func udpDrops(ap netip.AddrPort) int64 {
	lines := readLines("/proc/net/udp")
	if len(lines) < 2 {
		return -1
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 13 {
			continue
		}
		if a, err := parseHexAddr(f[1]); err != nil || a != ap {
			continue
		}
		v, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		return v
	}
	return -1
}

// parseHexAddr parses /proc/net/udp's local_address (the IPv4 address in host byte order,
// little endian here).
func parseHexAddr(s string) (netip.AddrPort, error) {
	var ip uint32
	var port uint16
	if _, err := fmt.Sscanf(s, "%08X:%04X", &ip, &port); err != nil {
		return netip.AddrPort{}, err
	}
	var a [4]byte
	binary.LittleEndian.PutUint32(a[:], ip)
	return netip.AddrPortFrom(netip.AddrFrom4(a), port), nil
}

// rcvbufErrors is the host's UDP RcvbufErrors counter (/proc/net/snmp), or -1.
func rcvbufErrors() int64 {
	lines := readLines("/proc/net/snmp")
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "Udp: ") && strings.HasPrefix(lines[i+1], "Udp: ") {
			names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j := range names {
				if names[j] == "RcvbufErrors" && j < len(vals) {
					v, _ := strconv.ParseInt(vals[j], 10, 64)
					return v
				}
			}
		}
	}
	return -1
}
