package quicguard

import (
	"math"
	"syscall"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// program returns the socket filter that lets through keep of the QUIC v1 Initials without
// a token and every other packet. A UDP socket's filter sees the packet from its UDP header:
// the QUIC packet starts at offset 8.
func program(keep float64) ([]bpf.RawInstruction, error) {
	const q = 8 // the QUIC packet's offset
	threshold := uint32(min(keep, 1) * math.MaxUint32)
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: q, Size: 1},                                     // 0: the first byte
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x80, SkipFalse: 11},           // 1: a short header: pass
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x30},                        // 2: the long header's type
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 9},               // 3: not an Initial: pass
		bpf.LoadAbsolute{Off: q + 5, Size: 1},                                 // 4: DCID length
		bpf.TAX{},                                                             // 5
		bpf.LoadIndirect{Off: q + 6, Size: 1},                                 // 6: SCID length
		bpf.ALUOpX{Op: bpf.ALUOpAdd},                                          // 7
		bpf.TAX{},                                                             // 8
		bpf.LoadIndirect{Off: q + 7, Size: 1},                                 // 9: the token length's first byte
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 2},               // 10: a token: pass
		bpf.LoadExtension{Num: bpf.ExtRand},                                   // 11
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: threshold, SkipTrue: 1}, // 12: past the share: drop
		bpf.RetConstant{Val: 0xffffffff},                                      // 13: pass
		bpf.RetConstant{Val: 0},                                               // 14: drop
	})
}

func attach(rc syscall.RawConn, keep float64) error {
	prog, err := program(keep)
	if err != nil {
		return err
	}
	f := make([]unix.SockFilter, len(prog))
	for i, p := range prog {
		f[i] = unix.SockFilter{Code: p.Op, Jt: p.Jt, Jf: p.Jf, K: p.K}
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]})
	})
	if err != nil {
		return err
	}
	return serr
}

func detach(rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
	})
	if err != nil {
		return err
	}
	return serr
}
