package xdesk

import (
	"context"
	"net"
	"testing"
)

func TestXfreerdpAuthenticatesThroughXrdp(t *testing.T) {
	if testing.Short() {
		t.Skip("xrdp and xfreerdp take seconds; skipped with -short")
	}
	need(t, "Xvnc", "xrdp", "xfreerdp", "Xvfb")
	t.Parallel()
	ctx := testContext(t)
	vnc := startXvnc(t, ctx, XvncOptions{TCPPort: AnyPort})
	x, err := StartXrdp(ctx, XrdpOptions{Dir: t.TempDir(), VNC: vnc.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("closing xrdp: %v", err)
		}
	})
	if err := XfreerdpAuthOnly(ctx, x.Address()); err != nil {
		t.Fatal(err)
	}
}

func TestXfreerdpFailsWhereNothingSpeaksRDP(t *testing.T) {
	if testing.Short() {
		t.Skip("xfreerdp takes seconds; skipped with -short")
	}
	need(t, "xfreerdp", "Xvfb")
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := XfreerdpAuthOnly(testContext(t), l.Addr().String()); err == nil {
		t.Error("got no error, want one: nothing speaks RDP there")
	} else {
		t.Logf("as expected: %v", err)
	}
}

func TestStartXrdpRefusesWhatItCannotFront(t *testing.T) {
	t.Parallel()
	for _, vnc := range []string{"", "/tmp/vnc.sock", "127.0.0.1", "127.0.0.1:0"} {
		if _, err := StartXrdp(context.Background(), XrdpOptions{Dir: t.TempDir(), VNC: vnc}); err == nil {
			t.Errorf("VNC %q: got no error, want one", vnc)
		}
	}
}
