//go:build linux

package health

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poller's system calls. None of them can block (every socket is non-blocking and
// epoll_wait gets a zero timeout), so they skip the runtime's system call bookkeeping: a
// normal call wakes sysmon when the process was idle, and that wake-up and its 20µs naps
// cost more than the call itself on a host where a context switch is dear.

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func rawSocket(family, typ int) (int, error) {
	fd, _, e := syscall.RawSyscall(unix.SYS_SOCKET, uintptr(family), uintptr(typ), 0)
	return int(fd), errnoErr(e)
}

// rawConnect connects fd to ap.
func rawConnect(fd int, ap netip.AddrPort) error {
	port := ap.Port()
	if a := ap.Addr(); a.Is4() || a.Is4In6() {
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		_, _, e := syscall.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
		return errnoErr(e)
	}
	sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	_, _, e := syscall.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	return errnoErr(e)
}

func rawWrite(fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, e := syscall.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(p), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawRead(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawClose(fd int) {
	syscall.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// rawLingerZero makes close send a reset and leave no TIME_WAIT.
func rawLingerZero(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	syscall.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
}

// rawSoError reads and clears the socket's pending error.
func rawSoError(fd int) (syscall.Errno, error) {
	var v int32
	n := uint32(unsafe.Sizeof(v))
	_, _, e := syscall.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&n)), 0)
	return syscall.Errno(v), errnoErr(e)
}

func rawEpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return errnoErr(e)
}

// rawEpollPoll returns the events ready now, without waiting.
func rawEpollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
