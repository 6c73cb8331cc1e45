package health

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPortStateHysteresis(t *testing.T) {
	m := DefaultMonitor()
	fail := errors.New("refused")
	drain := fmt.Errorf("503: %w", ErrDraining)
	tests := []struct {
		name    string
		initial State
		results []error
		want    []State // state after each result
	}{
		{"an up port stays up through fall-1 failures", StateUp,
			[]error{fail, fail, nil, fail, fail}, []State{StateUp, StateUp, StateUp, StateUp, StateUp}},
		{"an up port goes down on the fall-th consecutive failure", StateUp,
			[]error{fail, fail, fail, fail}, []State{StateUp, StateUp, StateDown, StateDown}},
		{"a down port needs rise consecutive successes", StateDown,
			[]error{nil, fail, nil, nil}, []State{StateDown, StateDown, StateDown, StateUp}},
		{"a 503 drains at once and successes bring it back after rise", StateUp,
			[]error{drain, nil, nil}, []State{StateDraining, StateDraining, StateUp}},
		{"a draining port goes down after fall failures", StateDraining,
			[]error{fail, fail, fail}, []State{StateDraining, StateDraining, StateDown}},
		{"a down port answering 503 is draining", StateDown,
			[]error{drain}, []State{StateDraining}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &portState{state: tt.initial}
			now := time.Unix(0, 0)
			for i, err := range tt.results {
				before := s.state
				changed := s.observe(err, time.Millisecond, now, &m)
				if s.state != tt.want[i] {
					t.Fatalf("after result %d (%v): state %v, want %v", i, err, s.state, tt.want[i])
				}
				if changed != (before != s.state) {
					t.Fatalf("after result %d: changed = %v, state %v -> %v", i, changed, before, s.state)
				}
			}
		})
	}
}

func TestPassiveFailuresWithinWindow(t *testing.T) {
	m := DefaultMonitor() // 3 within 5s
	s := &portState{state: StateUp}
	t0 := time.Unix(100, 0)
	err := errors.New("connection reset")
	if s.reportFailure(err, t0, &m) || s.reportFailure(err, t0.Add(time.Second), &m) {
		t.Fatal("went down before PassiveFailures reports")
	}
	// The first report falls out of the window: still two in it.
	if s.reportFailure(err, t0.Add(5*time.Second+time.Millisecond), &m) {
		t.Fatal("a report outside the window counted")
	}
	if !s.reportFailure(err, t0.Add(5500*time.Millisecond), &m) || s.state != StateDown {
		t.Fatalf("state %v after 3 reports within the window, want down", s.state)
	}
	// Only probes bring it back: rise successes.
	if s.observe(nil, 0, t0.Add(6*time.Second), &m) {
		t.Fatal("one success brought a passively downed port back")
	}
	if !s.observe(nil, 0, t0.Add(7*time.Second), &m) || s.state != StateUp {
		t.Fatalf("state %v after rise successes, want up", s.state)
	}
	off := m
	off.PassiveFailures = 0
	for i := range 10 {
		if s.reportFailure(err, t0.Add(time.Duration(8+i)*time.Second), &off) {
			t.Fatal("passive marking with PassiveFailures 0")
		}
	}
}

func TestComposeAndOverride(t *testing.T) {
	up, down, drain := StateUp, StateDown, StateDraining
	ps := func(states ...State) []*portState {
		var out []*portState
		for _, s := range states {
			out = append(out, &portState{state: s})
		}
		return out
	}
	optional := ps(up, down)
	optional[1].port.Optional = true
	allOptional := ps(up, down)
	allOptional[0].port.Optional, allOptional[1].port.Optional = true, true
	optionalDraining := ps(up, drain)
	optionalDraining[1].port.Optional = true
	optionalDown := ps(down, drain)
	optionalDown[1].port.Optional = true
	tests := []struct {
		name  string
		ports []*portState
		mode  Mode
		want  State
	}{
		{"all-of with every port up is up", ps(up, up, up), ModeAll, up},
		{"all-of with 443 down and 4172 up is down (no black screen)", ps(down, up, up), ModeAll, down},
		{"all-of with one port draining is draining", ps(up, drain, up), ModeAll, drain},
		{"all-of ignores a down optional port", optional, ModeAll, up},
		{"all-of over only optional ports counts them all", allOptional, ModeAll, down},
		{"any-of with one port up is up", ps(down, up), ModeAny, up},
		{"any-of with none up but one draining is draining", ps(down, drain), ModeAny, drain},
		{"any-of with every port down is down", ps(down, down), ModeAny, down},
		// A 503 asks for no new work for the whole target.
		{"any-of with one port up and one draining is draining", ps(up, drain), ModeAny, drain},
		{"all-of with an optional port draining is draining", optionalDraining, ModeAll, drain},
		{"all-of down stays down beside an optional draining port", optionalDown, ModeAll, down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compose(tt.ports, tt.mode); got != tt.want {
				t.Errorf("compose = %v, want %v", got, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		o           Override
		probed, out State
	}{
		{OverrideNone, down, down}, {OverrideUp, down, up}, {OverrideDown, up, down},
		{OverrideDrain, up, drain}, {OverrideDrain, down, down},
	} {
		if got := tt.o.apply(tt.probed); got != tt.out {
			t.Errorf("override %v on %v = %v, want %v", tt.o, tt.probed, got, tt.out)
		}
	}
}

func TestParseOverride(t *testing.T) {
	for word, want := range map[string]Override{"up": OverrideUp, "down": OverrideDown, "drain": OverrideDrain, "auto": OverrideNone} {
		if got, err := ParseOverride(word); err != nil || got != want {
			t.Errorf("ParseOverride(%q) = %v, %v; want %v", word, got, err, want)
		}
	}
	for _, bad := range []string{"", "none", "Drain", "sideways"} {
		if _, err := ParseOverride(bad); err == nil {
			t.Errorf("ParseOverride(%q) took it", bad)
		}
	}
}
