package starve

import (
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestMeterSeesAStarvedProcess: with one CPU taken by busy goroutines, a goroutine
// that the network wakes waits in the run queue, and the meter says so.
func TestMeterSeesAStarvedProcess(t *testing.T) {
	m := New()
	if m == nil {
		t.Fatalf("runtime has no %s histogram", schedMetric)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 16)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	})
	start := time.Now()
	m.Mark(start)
	stop := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for t0 := time.Now(); time.Since(t0) < time.Millisecond; {
				}
				time.Sleep(time.Microsecond)
			}
		})
	}
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	// The runtime samples the goroutines whose waits it records (one transition in eight), so
	// the load runs until a long wait shows, for 2 s at most.
	var got time.Duration
	for i := 0; i < 200 && got < 20*time.Millisecond; i++ {
		c.Write([]byte("x"))
		time.Sleep(10 * time.Millisecond)
		got = m.Longest(start)
	}
	c.Close()
	close(stop)
	pc.Close()
	wg.Wait()
	if got < 20*time.Millisecond {
		t.Fatalf("longest wait for a CPU with 64 busy goroutines on one: %v, want at least 20ms", got)
	}
	t.Logf("longest wait for a CPU: %v", got)
}
