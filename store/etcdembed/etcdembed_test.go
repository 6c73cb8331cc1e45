package etcdembed

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// testLogger passes warnings and errors to stderr, which go test shows for failing tests.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// start starts a cluster of n members in a temporary dir and closes it at the end of t.
func start(t *testing.T, n int) *Cluster {
	t.Helper()
	testkit.SecondTier(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	began := time.Now()
	c, err := Start(ctx, Options{Dir: t.TempDir(), Members: n, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d-member start took %v", n, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		began := time.Now()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("%d-member close took %v", n, time.Since(began).Round(time.Millisecond))
	})
	if got := len(c.Endpoints()); got != n {
		t.Fatalf("%d endpoints, want %d", got, n)
	}
	return c
}

// client returns a client of the given endpoints, closed at the end of t.
func client(t *testing.T, eps ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(t *testing.T, cli *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, k, v); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

func get(t *testing.T, cli *clientv3.Client, k string, opts ...clientv3.OpOption) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, k, opts...)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	if len(r.Kvs) != 1 {
		t.Fatalf("get %s: %d keys", k, len(r.Kvs))
	}
	return string(r.Kvs[0].Value)
}

func TestOneMember(t *testing.T) {
	// One member leaves no goroutine behind once closed. (Several do: their peer
	// connections to each other outlive Close.) Registered first, so run last.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := start(t, 1)
	if !strings.HasPrefix(c.Endpoints()[0], "http://127.0.0.1:") {
		t.Errorf("endpoint %q", c.Endpoints()[0])
	}
	if c.Member(0) != "member-0" || c.Member(1) != "" {
		t.Errorf("members %q, %q", c.Member(0), c.Member(1))
	}
	if err := c.StopMember(1); err == nil {
		t.Error("stopping member 1 of 1: no error")
	}
	cli := client(t, c.Endpoints()...)
	put(t, cli, "/frontdoor/k", "v1")
	if got := get(t, cli, "/frontdoor/k"); got != "v1" {
		t.Errorf("got %q, want v1", got)
	}
}

func TestThreeMembers(t *testing.T) {
	c := start(t, 3)
	eps := c.Endpoints()
	for i, ep := range eps {
		put(t, client(t, ep), "/frontdoor/k"+c.Member(i), ep)
	}
	for _, ep := range eps {
		if got := get(t, client(t, ep), "/frontdoor/kmember-2"); got != eps[2] {
			t.Errorf("%s: got %q, want %q", ep, got, eps[2])
		}
	}

	// A member killed: the two others keep quorum.
	began := time.Now()
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	t.Logf("member stop took %v", time.Since(began).Round(time.Millisecond))
	if err := c.StopMember(0); err == nil {
		t.Error("stopping a stopped member: no error")
	}
	rest := client(t, eps[1:]...)
	put(t, rest, "/frontdoor/after", "stop")
	if got := get(t, rest, "/frontdoor/after"); got != "stop" {
		t.Errorf("got %q, want stop", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	began = time.Now()
	if err := c.RestartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("member restart took %v", time.Since(began).Round(time.Millisecond))
	if err := c.RestartMember(ctx, 0); err == nil {
		t.Error("restarting a running member: no error")
	}
	// Serializable: answered by member 0 itself, from what it caught up on.
	back := client(t, eps[0])
	if got := get(t, back, "/frontdoor/after", clientv3.WithSerializable()); got != "stop" {
		t.Errorf("restarted member: got %q, want stop", got)
	}
	if got := get(t, back, "/frontdoor/after"); got != "stop" {
		t.Errorf("restarted member, linearizable: got %q, want stop", got)
	}
	put(t, back, "/frontdoor/after", "restart")
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	put(t, client(t, c.Endpoints()...), "/frontdoor/k", "kept")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Start(ctx, Options{Dir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := get(t, client(t, c.Endpoints()...), "/frontdoor/k"); got != "kept" {
		t.Errorf("got %q, want kept", got)
	}
}

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{
		{},
		{Dir: dir, Members: -1},
		{Dir: dir, Host: "192.0.2.1"},
		{Dir: dir, Host: "localhost"},
		{Dir: dir, Members: 2, ClientPorts: []int{20001}},
		{Dir: dir, ClientPorts: []int{20001}, PeerPorts: []int{20001}},
		{Dir: dir, PeerPorts: []int{70000}},
	} {
		if _, err := Start(t.Context(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestStartFailureStopsAll(t *testing.T) {
	// Member 1 cannot bind its client port, held by the test: nothing may stay running.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ports, err := freePorts("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = Start(ctx, Options{Dir: t.TempDir(), Members: 2, Logger: slog.New(slog.DiscardHandler),
		ClientPorts: []int{ports[0], taken.Addr().(*net.TCPAddr).Port}, PeerPorts: ports[1:]})
	if err == nil {
		t.Fatal("no error")
	}
	t.Log(err)
	// Member 0's ports are free again: a single member starts on them.
	c, err := Start(ctx, Options{Dir: t.TempDir(), Logger: testLogger(), ClientPorts: ports[:1], PeerPorts: ports[1:2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestZapToSlog(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var buf syncBuffer
		c := &Cluster{opts: Options{Debug: debug},
			log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		lg := c.zapLogger("member-7", nil).Named("raft").With(zap.String("id", "8e9e"))
		lg.Info("became leader", zap.Int("term", 2))
		lg.Error("lost peer", zap.Error(errors.New("connection refused")), zap.Duration("after", time.Second))
		out := buf.String()
		for _, want := range []string{"level=ERROR", `msg="lost peer"`, "component=etcd", "member=member-7",
			"logger=raft", "id=8e9e", `error="connection refused"`, "after=1s"} {
			if !strings.Contains(out, want) {
				t.Errorf("debug %v: %q lacks %s", debug, out, want)
			}
		}
		if got := strings.Contains(out, "became leader"); got != debug {
			t.Errorf("debug %v: info logged: %v; %q", debug, got, out)
		}
	}
}

// TestStorageVersionRaceIsNoError feeds etcd's storage version failures to a member's
// logger: the first for want of a term (the race of a new member, which etcd mends 4 s
// later) is an info; a second, or any other failure of it, stays an error.
func TestStorageVersionRaceIsNoError(t *testing.T) {
	noTerm := errors.New("cannot detect storage schema version: missing term information")
	noPlan := errors.New(`cannot create migration plan: version "3.9.0" is not supported`)
	for _, tc := range []struct {
		name string
		errs []error
		want []string // the level of each line written, "" for none
	}{
		{"the first missing term is an info", []error{noTerm}, []string{"INFO"}},
		{"a second missing term is an error", []error{noTerm, noTerm}, []string{"INFO", "ERROR"}},
		{"another failure is an error", []error{noPlan, noTerm}, []string{"ERROR", "INFO"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			c := &Cluster{opts: Options{Debug: true},
				log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			lg := c.zapLogger("member-0", nil)
			for _, err := range tc.errs {
				lg.Error(storageVersionMsg, zap.String("cluster-version", "3.7.0"), zap.Error(err))
			}
			var got []string
			for line := range strings.Lines(buf.String()) {
				_, after, _ := strings.Cut(line, "level=")
				level, _, _ := strings.Cut(after, " ")
				got = append(got, level)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("levels %v, want %v:\n%s", got, tc.want, buf.String())
			}
		})
	}
	// Without Debug, only errors pass: the race writes nothing.
	var buf syncBuffer
	c := &Cluster{log: slog.New(slog.NewTextHandler(&buf, nil))}
	c.zapLogger("member-0", nil).Error(storageVersionMsg, zap.Error(noTerm))
	if buf.String() != "" {
		t.Errorf("the race was written without Debug: %q", buf.String())
	}
}
