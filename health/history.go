package health

// HistoryLen is how many events a Checker keeps of each target for History: enough for an
// operator to see the last transitions of a gateway's ports and their reasons.
const HistoryLen = 20

// history is a ring of a target's last events; the Checker's mu guards it.
type history struct {
	evs  [HistoryLen]Event
	n    int // events held, up to HistoryLen
	next int // where the next one goes
}

func (h *history) add(ev Event) {
	h.evs[h.next] = ev
	h.next = (h.next + 1) % HistoryLen
	h.n = min(h.n+1, HistoryLen)
}

// newestFirst returns a copy of the events held, the newest first.
func (h *history) newestFirst() []Event {
	out := make([]Event, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.evs[(h.next-i+HistoryLen)%HistoryLen])
	}
	return out
}

// History returns the last HistoryLen events of the named target, newest first: the same
// events Subscribe delivers (a port's state changed, by a probe, a passive report or its
// prober; an admin override), recorded when they happen, whether or not Run delivers them
// yet. It returns nil for an unknown target and an empty slice for one without events.
func (c *Checker) History(name string) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := c.targets[name]
	if !ok {
		return nil
	}
	return tg.hist.newestFirst()
}
