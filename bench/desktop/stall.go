package main

// Benchmark 3: the stall a viewer sees when its gateway dies. Two gateway processes; a viewer
// on the builtin desktop asks for incremental updates and types a key every 50 ms through the
// gateway its session uses; that gateway's process is killed (SIGKILL), then started again,
// so that the session alternates between the two. For each kill: the time from the kill to
// the next framebuffer update, and whether the viewer's connection broke.

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

func stallMain(args []string) error {
	fs := flag.NewFlagSet("stall", flag.ExitOnError)
	e := envFlags(fs)
	kills := fs.Int("kills", 24, "gateway kills")
	settle := fs.Duration("settle", time.Second, "steady typing between a restart and the next kill")
	fs.Parse(args)
	s, err := loadSite(e.dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ag, err := spawn(e.work, "agent-stall", e.loadCPU, "agent", "-dir", e.dir, "-n", "1")
	if err != nil {
		return err
	}
	defer ag.stop()
	var gws [2]*child
	for i := range gws {
		if gws[i], err = spawn(e.work, gatewayNames[i]+"-stall", e.relayCPU, "gateway", "-dir", e.dir, "-n", fmt.Sprint(i)); err != nil {
			return err
		}
	}
	defer func() {
		for _, g := range gws {
			if g != nil {
				g.stop()
			}
		}
	}()
	d, err := s.descriptor("stall", 1, "builtin", 0, 1)
	if err != nil {
		return err
	}
	sess, err := s.open(ctx, d, 0, false, netip.Addr{})
	if err != nil {
		return err
	}
	defer sess.Close()
	tv := &typingViewer{sess: sess, updates: make(chan time.Time, 1024)}
	if err := tv.start(ctx); err != nil {
		return err
	}
	defer tv.close()

	var stalls, backs []time.Duration
	disconnects, lost := 0, 0
	for k := range *kills {
		// Steady first: the session up and updates flowing.
		if err := sess.WaitUp(ctx); err != nil {
			return err
		}
		time.Sleep(*settle)
		if !tv.flowing(500 * time.Millisecond) {
			return fmt.Errorf("kill %d: no update in the last 500ms before the kill", k+1)
		}
		name, _ := sess.Via()
		i := map[string]int{"gw-a": 0, "gw-b": 1}[name]
		tv.drain()
		breaks := tv.breaks()
		t0 := time.Now()
		gws[i].kill()
		stall, ok := tv.gapAfter(t0, sess, name)
		if !ok {
			lost++
		}
		if b := tv.breaks(); b > breaks {
			disconnects += b - breaks
		}
		if ok {
			stalls = append(stalls, stall)
		}
		if b, ok := backAfter(sess, t0); ok {
			backs = append(backs, b)
		}
		next, _ := sess.Via()
		fmt.Fprintf(os.Stderr, "kill %d of %s: longest gap %v (now via %s), viewer breaks so far %d\n", k+1, name, stall, next, tv.breaks())
		if gws[i], err = spawn(e.work, fmt.Sprintf("%s-stall-%d", gatewayNames[i], k+1), e.relayCPU, "gateway", "-dir", e.dir, "-n", fmt.Sprint(i)); err != nil {
			return err
		}
	}
	ds, db := distOf(stalls), distOf(backs)
	fmt.Printf("### 3. Stall at a gateway kill\n\n")
	fmt.Printf("Two gateway processes (CPU %s); a viewer (CPU %s) on the builtin desktop through a client session whose descriptor "+
		"lists both, incremental requests and a key every 50 ms; %d times the process of the gateway carrying the session is "+
		"killed (SIGKILL) after %v of steady typing, then started again, so that the session alternates. Stall: the longest "+
		"time without a framebuffer update from the kill until three updates after the session is back through the other "+
		"gateway (an update already on its way at the kill does not hide it; with a key every 50 ms, 50 ms is the floor). "+
		"Back: from the kill to the client's EventBack.\n\n",
		e.relayCPU, e.loadCPU, *kills, *settle)
	fmt.Println("| kills | p50 stall ms | p99 stall ms | max ms | min ms | back p50 / p99 ms | no update within 30 s | viewer disconnects | goal | met? |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	met := yes(ds.p99 <= 3*time.Second && disconnects == 0 && lost == 0)
	minStall := time.Duration(0)
	if len(stalls) > 0 {
		minStall = slices.Min(stalls)
	}
	fmt.Printf("| %d | %s | %s | %s | %s | %s / %s | %d | %d | p99 ≤ 3 s, 0 disconnects | %s |\n\n", *kills, ms(ds.p50), ms(ds.p99),
		ms(ds.max), ms(minStall), ms(db.p50), ms(db.p99), lost, disconnects, met)
	e.summary("3. stall at a gateway kill (%d kills) | p50 %s / p99 %s ms, %d disconnects | – | – | p99 ≤ 3 s, 0 disconnects | %s",
		*kills, ms(ds.p50), ms(ds.p99), disconnects+lost, met)
	return nil
}

// typingViewer is a viewer on a session's desktop stream that asks for incremental updates
// and types a key every 50 ms; it reports the time of every update, and reconnects (counting
// a break) when its connection fails.
type typingViewer struct {
	sess    *client.Session
	updates chan time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex // guards v, last, nbreak
	v      *viewer
	last   time.Time
	nbreak int
}

func (tv *typingViewer) start(ctx context.Context) error {
	tv.ctx, tv.cancel = context.WithCancel(ctx)
	if err := tv.connect(); err != nil {
		return err
	}
	tv.wg.Go(tv.read)
	tv.wg.Go(tv.typeKeys)
	return nil
}

func (tv *typingViewer) connect() error {
	c, err := tv.sess.Attach(tv.ctx, displayPort)
	if err != nil {
		return err
	}
	v, err := newViewer(c)
	if err != nil {
		return err
	}
	if err := v.rfb.RequestAll(true); err != nil {
		v.Close()
		return err
	}
	tv.mu.Lock()
	tv.v, tv.last = v, time.Now()
	tv.mu.Unlock()
	return nil
}

func (tv *typingViewer) read() {
	for range 1 << 30 {
		if tv.ctx.Err() != nil {
			return
		}
		tv.mu.Lock()
		v := tv.v
		tv.mu.Unlock()
		_, err := v.update()
		if err == nil {
			err = v.rfb.RequestAll(true)
		}
		if err != nil {
			if tv.ctx.Err() != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "stall: the viewer's connection broke: %v\n", err)
			v.Close()
			tv.mu.Lock()
			tv.nbreak++
			tv.mu.Unlock()
			for range 100 {
				if err = tv.connect(); err == nil || tv.ctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		now := time.Now()
		tv.mu.Lock()
		tv.last = now
		tv.mu.Unlock()
		select {
		case tv.updates <- now:
		default:
		}
	}
}

func (tv *typingViewer) typeKeys() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-tv.ctx.Done():
			return
		case <-t.C:
		}
		tv.mu.Lock()
		v := tv.v
		tv.mu.Unlock()
		key := uint32('x')
		if i%2 == 1 {
			key = rfb.KeyBackSpace
		}
		v.rfb.Key(key, true)
		v.rfb.Key(key, false)
	}
}

// backAfter returns the time from t0 to the session's first EventBack after it.
func backAfter(sess *client.Session, t0 time.Time) (time.Duration, bool) {
	for _, ev := range sess.Timeline() {
		if ev.Kind == client.EventBack && ev.At.After(t0) {
			return ev.At.Sub(t0), true
		}
	}
	return 0, false
}

// gapAfter returns the longest time without an update from t0 (a kill of gateway gw) until
// three updates have come since the session was seen up through another gateway: an update
// that was on its way before the kill does not hide the stall. It waits at most 30s; ok is
// false when the updates did not come back within it.
func (tv *typingViewer) gapAfter(t0 time.Time, sess *client.Session, gw string) (gap time.Duration, ok bool) {
	prev, after := t0, -1
	timeout := time.After(30 * time.Second)
	for after < 3 {
		select {
		case t := <-tv.updates:
			gap = max(gap, t.Sub(prev))
			prev = t
			if after >= 0 {
				after++
			} else if via, _ := sess.Via(); sess.Up() && via != gw {
				after = 1
			}
		case <-timeout:
			return max(gap, time.Since(prev)), false
		}
	}
	return gap, true
}

// flowing reports whether an update came within d.
func (tv *typingViewer) flowing(d time.Duration) bool {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	return time.Since(tv.last) < d
}

// drain forgets the updates reported so far.
func (tv *typingViewer) drain() {
	for {
		select {
		case <-tv.updates:
		default:
			return
		}
	}
}

func (tv *typingViewer) breaks() int {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	return tv.nbreak
}

func (tv *typingViewer) close() {
	tv.cancel()
	tv.mu.Lock()
	tv.v.Close()
	tv.mu.Unlock()
	tv.wg.Wait()
}
