package rfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// step is one move of a scripted peer: send bytes, or read n bytes and expect them (when
// want is set).
type step struct {
	send []byte
	read int
	want []byte
}

// script plays steps on c and reports the first difference or failure.
func script(c net.Conn, steps []step) error {
	for i, s := range steps {
		if s.send != nil {
			if _, err := c.Write(s.send); err != nil {
				return err
			}
			continue
		}
		got := make([]byte, s.read)
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if s.want != nil && !bytes.Equal(got, s.want) {
			return &stepError{i, got, s.want}
		}
	}
	return nil
}

type stepError struct {
	i         int
	got, want []byte
}

func (e *stepError) Error() string {
	return fmt.Sprintf("step %d: got %q, want %q", e.i, e.got, e.want)
}

func pipe(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	d := time.Now().Add(10 * time.Second)
	a.SetDeadline(d)
	b.SetDeadline(d)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func serverInit(w, h uint16, name string) []byte {
	b := binary.BigEndian.AppendUint16(nil, w)
	b = binary.BigEndian.AppendUint16(b, h)
	pf := make([]byte, 16)
	StandardFormat().put(pf)
	return appendString(append(b, pf...), name)
}

func TestServerHandshakeVersions(t *testing.T) {
	init := serverInit(10, 20, "n")
	const refusal = "only security type None is offered"
	tests := []struct {
		name    string
		steps   []step
		wantErr error
	}{
		{"a 3.8 viewer gets a security result", []step{
			{read: 12, want: []byte(version38)}, {send: []byte("RFB 003.008\n")},
			{read: 2, want: []byte{1, 1}}, {send: []byte{1}}, {read: 4, want: u32(0)},
			{send: []byte{1}}, {read: len(init), want: init}}, nil},
		{"a 3.7 viewer gets no security result", []step{
			{read: 12}, {send: []byte("RFB 003.007\n")},
			{read: 2, want: []byte{1, 1}}, {send: []byte{1}},
			{send: []byte{0}}, {read: len(init), want: init}}, nil},
		{"a 3.3 viewer is told the security type", []step{
			{read: 12}, {send: []byte("RFB 003.003\n")},
			{read: 4, want: u32(1)}, {send: []byte{1}}, {read: len(init), want: init}}, nil},
		{"an unknown 3.x viewer is taken as 3.3", []step{
			{read: 12}, {send: []byte("RFB 003.005\n")},
			{read: 4, want: u32(1)}, {send: []byte{1}}, {read: len(init), want: init}}, nil},
		{"a 3.8 viewer choosing VNC authentication is refused with a reason", []step{
			{read: 12}, {send: []byte("RFB 003.008\n")},
			{read: 2}, {send: []byte{2}}, {read: 4, want: u32(1)},
			{read: 4 + len(refusal), want: appendString(nil, refusal)}}, ErrNoSecurity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, cc := pipe(t)
			done := make(chan error, 1)
			go func() { done <- script(cc, tt.steps) }()
			_, err := ServerHandshake(sc, 10, 20, "n")
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("ServerHandshake = %v, want %v", err, tt.wantErr)
			}
			if err := <-done; err != nil {
				t.Errorf("viewer: %v", err)
			}
		})
	}
}

func TestServerHandshakeRefusesGarbage(t *testing.T) {
	sc, cc := pipe(t)
	done := make(chan error, 1)
	go func() { done <- script(cc, []step{{read: 12}, {send: []byte("GET / HTTP/1")}}) }()
	if _, err := ServerHandshake(sc, 10, 20, "n"); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("ServerHandshake = %v, want a malformed version error", err)
	}
	<-done
}

func TestClientHandshakeVersions(t *testing.T) {
	init := serverInit(10, 20, "desk")
	setup := 20 + 4 + 4*4 // SetPixelFormat and SetEncodings
	tests := []struct {
		name    string
		steps   []step
		wantErr error
		errText string
	}{
		{"a 3.8 server with None", []step{
			{send: []byte(version38)}, {read: 12, want: []byte(version38)},
			{send: []byte{2, 2, 1}}, {read: 1, want: []byte{1}}, {send: u32(0)},
			{read: 1, want: []byte{1}}, {send: init}, {read: setup}}, nil, ""},
		{"a later server is spoken to in 3.8", []step{
			{send: []byte("RFB 004.001\n")}, {read: 12, want: []byte(version38)},
			{send: []byte{1, 1}}, {read: 1}, {send: u32(0)},
			{read: 1}, {send: init}, {read: setup}}, nil, ""},
		{"a 3.7 server sends no security result", []step{
			{send: []byte("RFB 003.007\n")}, {read: 12, want: []byte("RFB 003.007\n")},
			{send: []byte{1, 1}}, {read: 1, want: []byte{1}},
			{read: 1}, {send: init}, {read: setup}}, nil, ""},
		{"a 3.3 server chooses None", []step{
			{send: []byte("RFB 003.003\n")}, {read: 12, want: []byte("RFB 003.003\n")},
			{send: u32(1)}, {read: 1}, {send: init}, {read: setup}}, nil, ""},
		{"a 3.8 server offering only VNC authentication", []step{
			{send: []byte(version38)}, {read: 12}, {send: []byte{1, 2}}}, ErrAuthRequired, ""},
		{"a 3.3 server requiring VNC authentication", []step{
			{send: []byte("RFB 003.003\n")}, {read: 12}, {send: u32(2)}}, ErrAuthRequired, ""},
		{"a server offering nothing in common", []step{
			{send: []byte(version38)}, {read: 12}, {send: []byte{1, 19}}}, ErrNoSecurity, ""},
		{"a server refusing the connection gives its reason", []step{
			{send: []byte(version38)}, {read: 12}, {send: []byte{0}}, {send: appendString(nil, "too many")}}, nil, "too many"},
		{"a failed security result gives its reason", []step{
			{send: []byte(version38)}, {read: 12}, {send: []byte{1, 1}}, {read: 1},
			{send: u32(1)}, {send: appendString(nil, "go away")}}, nil, "go away"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, cc := pipe(t)
			done := make(chan error, 1)
			go func() { done <- script(sc, tt.steps) }()
			c, err := NewClient(cc)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("NewClient = %v, want %v", err, tt.wantErr)
			case tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)):
				t.Errorf("NewClient = %v, want an error containing %q", err, tt.errText)
			case tt.wantErr == nil && tt.errText == "" && err != nil:
				t.Errorf("NewClient = %v", err)
			case err == nil && (c.Name() != "desk" || c.Width() != 10 || c.Height() != 20):
				t.Errorf("client saw %q %dx%d, want %q 10x20", c.Name(), c.Width(), c.Height(), "desk")
			}
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		})
	}
}
