//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// echoResult is what a client process reports to the orchestrator (one JSON line).
type echoResult struct {
	Echoed    int64   `json:"echoed"`  // replies received inside the window
	Sent      int64   `json:"sent"`    // datagrams sent inside the window
	Lost      int64   `json:"lost"`    // of those, never answered (timed out or outstanding at the end)
	Seconds   float64 `json:"seconds"` // the window
	P50us     float64 `json:"p50_us"`  // round trip of the replies in the window
	P99us     float64 `json:"p99_us"`  //
	ClientCPU float64 `json:"cpu_s"`   // this process's user+system seconds inside the window
	Err       string  `json:"err,omitempty"`
}

// cpuSelf is this process's user+system CPU seconds so far.
func cpuSelf() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// mark tells the orchestrator (reading stdout) where the measured window starts and ends, so
// it reads the server's CPU at the same moments.
func mark(s string) { fmt.Fprintln(os.Stdout, s) }

// runEcho keeps window datagrams of size bytes in flight to the echo server over l: warm-up,
// then the measured window (marked START/END), then a bounded drain. A datagram unanswered
// after lossAfter counts as lost and frees its place in the window.
func runEcho(l link, size, window int, warm, dur time.Duration) echoResult {
	const lossAfter = 300 * time.Millisecond
	const maxSends = 50_000_000
	if size < 16 {
		size = 16
	}
	type flight struct {
		at       int64 // send time, ns since t0
		measured bool
	}
	var (
		mu       sync.Mutex
		inflight = make(map[uint64]flight, window*2)
		measure  bool // sends are inside the window
		counting bool // replies are inside the window
		res      echoResult
		rtts     = make([]int64, 0, 1<<20)
	)
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	t0 := time.Now()
	now := func() int64 { return int64(time.Since(t0)) }
	stop := make(chan struct{})
	recvDone := make(chan struct{})

	go func() { // receiver
		defer close(recvDone)
		buf := make([]byte, 2048)
		for {
			n, err := l.recv(buf)
			if err != nil {
				return
			}
			if n < 16 {
				continue
			}
			seq := binary.LittleEndian.Uint64(buf)
			mu.Lock()
			f, ok := inflight[seq]
			if ok {
				delete(inflight, seq)
				if counting {
					res.Echoed++
					if len(rtts) < cap(rtts) {
						rtts = append(rtts, now()-f.at)
					}
				}
			}
			mu.Unlock()
			if ok {
				tokens <- struct{}{}
			}
		}
	}()
	go func() { // reaper: frees the places of datagrams that never came back
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			mu.Lock()
			cut, freed := now()-int64(lossAfter), 0
			for seq, f := range inflight {
				if f.at < cut {
					delete(inflight, seq)
					if f.measured {
						res.Lost++
					}
					freed++
				}
			}
			mu.Unlock()
			for range freed {
				tokens <- struct{}{}
			}
		}
	}()

	buf := make([]byte, size)
	var seq uint64
	var cpu0 float64
	phaseEnd := t0.Add(warm)
	phase := 0 // 0 warm-up, 1 measured
	var tw time.Time
	var sendErr error
	for i := 0; i < maxSends; i++ {
		t := time.Now()
		if t.After(phaseEnd) {
			if phase == 1 {
				break
			}
			phase = 1
			mark("START")
			cpu0 = cpuSelf()
			mu.Lock()
			measure, counting = true, true
			mu.Unlock()
			tw = time.Now()
			phaseEnd = tw.Add(dur)
		}
		select {
		case <-tokens:
		default:
			select {
			case <-tokens:
			case <-time.After(lossAfter):
				continue
			}
		}
		seq++
		binary.LittleEndian.PutUint64(buf, seq)
		mu.Lock()
		inflight[seq] = flight{at: now(), measured: measure}
		if measure {
			res.Sent++
		}
		mu.Unlock()
		if err := l.send(buf); err != nil && sendErr == nil {
			sendErr = err
		}
	}
	mu.Lock()
	counting, measure = false, false
	mu.Unlock()
	cpu1 := cpuSelf()
	mark("END")
	res.ClientCPU = cpu1 - cpu0
	res.Seconds = time.Since(tw).Seconds()
	// Drain: the datagrams still in flight get lossAfter to come back (not counted as echoed,
	// but not lost either).
	deadline := time.Now().Add(lossAfter + 50*time.Millisecond)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := 0
		for _, f := range inflight {
			if f.measured {
				n++
			}
		}
		mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	mu.Lock()
	for _, f := range inflight {
		if f.measured {
			res.Lost++
		}
	}
	mu.Unlock()
	l.close()
	select {
	case <-recvDone:
	case <-time.After(time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(rtts)
	if len(rtts) > 0 {
		res.P50us = float64(rtts[len(rtts)/2]) / 1e3
		res.P99us = float64(rtts[len(rtts)*99/100]) / 1e3
	}
	if sendErr != nil {
		res.Err = sendErr.Error()
	}
	return res
}

// hsResult: n handshakes one after another, each on a new socket, closed right after.
type hsResult struct {
	N         int     `json:"n"`
	Failed    int     `json:"failed"`
	Seconds   float64 `json:"seconds"`
	ClientCPU float64 `json:"cpu_s"`
	Err       string  `json:"err,omitempty"`
}

func runHandshakes(proto, addr string, c *certs, n int) hsResult {
	var r hsResult
	mark("START")
	cpu0, t0 := cpuSelf(), time.Now()
	for i := 0; i < n; i++ {
		l, err := dial(proto, addr, c)
		if err != nil {
			r.Failed++
			r.Err = err.Error()
			continue
		}
		r.N++
		l.close()
	}
	r.Seconds = time.Since(t0).Seconds()
	r.ClientCPU = cpuSelf() - cpu0
	mark("END")
	return r
}

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(os.Stdout, "RESULT %s\n", b)
}
