package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The standard engine sets TCP_DEFER_ACCEPT on a listener with DeferAccept, as the raw one
// does, and still carries a client that speaks first.
func TestStdEngineDefersAccept(t *testing.T) {
	be := startTCP(t, echo)
	l := tcpListener("l", "p")
	l.DeferAccept = true
	s := startStd(t, Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}}, nil)
	c, err := net.Dial("tcp", s.Addr("l").String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	got := make([]byte, 5)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
		t.Fatalf("echo through a deferred listener: %q, %v", got, err)
	}
	ctl, err := deferAcceptControl(5 * time.Second)
	if err != nil || ctl == nil {
		t.Fatalf("deferAcceptControl: no control (%v)", err)
	}
	// The option reads back from a socket it was set on.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	rc, _ := probe.(*net.TCPListener).SyscallConn()
	if err := ctl("tcp", "", rc); err != nil {
		t.Fatal(err)
	}
	var v int
	rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT) })
	if err != nil || v <= 0 {
		t.Fatalf("TCP_DEFER_ACCEPT reads %d (%v), want it set", v, err)
	}
}
