package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// report gathers the trials and prints them.
type report struct {
	elections map[string][]electionTrial
	outages   []outageTrial
	skipped   map[string]int // trials not run for the budget, by measurement
	took      time.Duration
}

// dist is the distribution of one measurement over its trials; failed trials count apart.
type dist struct {
	vals   []time.Duration
	failed int
}

func (d *dist) add(v time.Duration, ok bool) {
	if !ok {
		d.failed++
		return
	}
	d.vals = append(d.vals, v)
}

// pct returns the nearest-rank percentile p (0 < p ≤ 1): with fewer than 100 values p99 is
// the largest.
func (d *dist) pct(p float64) time.Duration {
	if len(d.vals) == 0 {
		return -1
	}
	s := slices.Clone(d.vals)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func (d *dist) max() time.Duration {
	if len(d.vals) == 0 {
		return -1
	}
	return slices.Max(d.vals)
}

func (d *dist) min() time.Duration {
	if len(d.vals) == 0 {
		return -1
	}
	return slices.Min(d.vals)
}

// row is one line of the summary.
type row struct {
	what string
	d    dist
	goal time.Duration // 0: none
	note string        // the goal column when there is no goal
}

func (r row) print(w io.Writer) {
	n := fmt.Sprint(len(r.d.vals))
	if r.d.failed > 0 {
		n += fmt.Sprintf(" (+%d failed)", r.d.failed)
	}
	goal, met := r.note, "–"
	if r.goal > 0 {
		goal = "≤ " + ms(r.goal)
		met = "yes"
		switch {
		case r.d.failed > 0 || len(r.d.vals) == 0:
			met = "**no**"
		case r.d.max() > r.goal:
			met = "**no** (max over by " + ms(r.d.max()-r.goal) + ")"
		}
	}
	if len(r.d.vals) == 0 {
		fmt.Fprintf(w, "| %s | %s | – | – | – | – | %s | %s |\n", r.what, n, goal, met)
		return
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.what, n, msSigned(r.d.min()), msSigned(r.d.pct(0.5)), msSigned(r.d.pct(0.99)), msSigned(r.d.max()), goal, met)
}

func (rep *report) print(w io.Writer, trials int, counts []int) {
	fmt.Fprintf(w, "## Summary\n\n")
	fmt.Fprintf(w, "Nearest-rank percentiles: with fewer than 100 trials p99 is the largest value. A failed trial\n")
	fmt.Fprintf(w, "(a wait past its bound) counts against its goal. The whole run took %v.\n\n", rep.took.Round(time.Second))
	fmt.Fprintf(w, "| measurement | trials | min | p50 | p99 | max | goal | met? |\n|---|---|---|---|---|---|---|---|\n")
	type part struct {
		what string
		get  func(electionTrial) time.Duration
		goal time.Duration
		note string
	}
	parts := map[string][]part{
		graceful: {
			{"1. graceful shutdown (leader's ctx canceled) → the next leader leads and its view shows it", func(t electionTrial) time.Duration { return t.took }, 500 * time.Millisecond, ""},
			{"… and every remaining node's view shows it", func(t electionTrial) time.Duration { return t.all }, 500 * time.Millisecond, ""},
		},
		crash: {
			{"2. crash (leader's client closed) → the next leader leads and its view shows it", func(t electionTrial) time.Duration { return t.took }, 2 * time.Second, ""},
			{"… of which the old key's end (lease expiry, revoke, watch event)", func(t electionTrial) time.Duration { return t.gone }, 0, "doc: 0.67–1.5 s"},
			{"… and every remaining node's view shows it", func(t electionTrial) time.Duration { return t.all }, 2 * time.Second, ""},
		},
		runoff: {
			{"3. run-off (a newer version starts standing) → it leads and its view shows it", func(t electionTrial) time.Duration { return t.took }, 0, "none stated"},
			{"… of which the old leader's resignation", func(t electionTrial) time.Duration { return t.old }, 0, ""},
			{"… the joining node's own view shows its candidacy", func(t electionTrial) time.Duration { return t.self }, 0, ""},
			{"… and every node's view shows it", func(t electionTrial) time.Duration { return t.all }, 0, ""},
		},
	}
	for _, kind := range []string{graceful, crash, runoff} {
		trs := rep.elections[kind]
		if len(trs) == 0 {
			continue
		}
		for _, p := range parts[kind] {
			r := row{what: p.what, goal: p.goal, note: p.note}
			for _, t := range trs {
				v := p.get(t)
				r.d.add(v, t.err == nil && v >= 0)
			}
			r.print(w)
		}
		twice := 0
		for _, t := range trs {
			twice += t.twice
		}
		if twice > 0 {
			fmt.Fprintf(w, "| … samples in which two Electors led at once (%s) | %d | | | | | 0 | **no** |\n", kind, twice)
		}
	}
	rep.printOutageSummary(w, counts)
	for kind, n := range rep.skipped {
		fmt.Fprintf(w, "\n%d %s trials were not run: the budget was spent.\n", n, kind)
	}
	rep.printTrials(w)
}

func (rep *report) printOutageSummary(w io.Writer, counts []int) {
	var one, all []outageTrial
	for _, t := range rep.outages {
		if t.allEPs {
			all = append(all, t)
		} else {
			one = append(one, t)
		}
	}
	each := func(trs []outageTrial, get func(outageTrial) []time.Duration) dist {
		var d dist
		for _, t := range trs {
			vs := get(t)
			if t.err != nil && len(vs) == 0 {
				d.failed++
			}
			for _, v := range vs {
				d.add(v, true)
			}
		}
		return d
	}
	one1 := func(trs []outageTrial, get func(outageTrial) (time.Duration, bool)) dist {
		var d dist
		for _, t := range trs {
			v, ok := get(t)
			d.add(v, ok && t.err == nil)
		}
		return d
	}
	if len(all) > 0 {
		rows := []row{
			{what: "4. outage mode (Outage().On), from the first StopMember call", d: each(all, func(t outageTrial) []time.Duration { return t.in }), note: "–"},
			{what: "… etcd stopped answering (own 10 ms probe loop), from the call", d: one1(all, func(t outageTrial) (time.Duration, bool) { return t.lost, t.lostOK }), note: "–"},
			{what: "… outage mode, from etcd's loss", d: each(all, func(t outageTrial) []time.Duration { return t.inLost }), goal: 1250 * time.Millisecond},
			{what: "… outage mode, from the node's first failed probe's start (estimated from its 250 ms grid)", d: each(all, func(t outageTrial) []time.Duration { return t.inProbe }), goal: time.Second},
			{what: "… StopMember (both, at once) returned, from the call", d: one1(all, func(t outageTrial) (time.Duration, bool) { return t.stopRet, t.stopRet > 0 }), note: "–"},
		}
		for _, r := range rows {
			r.print(w)
		}
		for _, n := range counts {
			var trs []outageTrial
			for _, t := range all {
				if t.sessions == n {
					trs = append(trs, t)
				}
			}
			if len(trs) == 0 {
				continue
			}
			rows := []row{
				{what: fmt.Sprintf("5. write-back, %d sessions made in the outage: each node out of outage mode, from RestartMember's return", n), d: each(trs, func(t outageTrial) []time.Duration { return t.out }), note: "report growth"},
				{what: "… both nodes out", d: one1(trs, func(t outageTrial) (time.Duration, bool) {
					if len(t.out) == 0 {
						return 0, false
					}
					return slices.Max(t.out), true
				}), note: "–"},
				{what: "… etcd answered again (own probe loop), from RestartMember's return", d: one1(trs, func(t outageTrial) (time.Duration, bool) { return t.back, t.backOK }), note: "–"},
				{what: "… the longest launch (CreateSession, one every 20 ms) at a from RestartMember's return until both were out", d: one1(trs, func(t outageTrial) (time.Duration, bool) { return t.late, t.late > 0 }), note: "–"},
			}
			for _, r := range rows {
				r.print(w)
			}
			written, conflicts := 0, 0
			for _, t := range trs {
				written += t.written
				conflicts += t.conflicts
			}
			fmt.Fprintf(w, "| … sessions in etcd after the write-backs | %d of %d | | | | | all | %s |\n", written, n*len(trs), yes(written == n*len(trs)))
			if conflicts > 0 {
				fmt.Fprintf(w, "| … conflicts reported | %d | | | | | 0 | **no** |\n", conflicts)
			}
		}
	}
	if len(one) > 0 {
		rows := []row{
			{what: "4'. nodes that know only the member that stays up: outage mode, from the first StopMember call", d: each(one, func(t outageTrial) []time.Duration { return t.in }), note: "–"},
			{what: "… etcd stopped answering, from the call", d: one1(one, func(t outageTrial) (time.Duration, bool) { return t.lost, t.lostOK }), note: "–"},
			{what: "… outage mode, from etcd's loss", d: each(one, func(t outageTrial) []time.Duration { return t.inLost }), goal: 1250 * time.Millisecond},
			{what: "… outage mode, from the node's first failed probe's start (estimated)", d: each(one, func(t outageTrial) []time.Duration { return t.inProbe }), goal: time.Second},
			{what: "… StopMember returned, from the call", d: one1(one, func(t outageTrial) (time.Duration, bool) { return t.stopRet, t.stopRet > 0 }), note: "–"},
			{what: "… write-back (0 sessions), each node, from RestartMember's return", d: each(one, func(t outageTrial) []time.Duration { return t.out }), note: "–"},
		}
		for _, r := range rows {
			r.print(w)
		}
	}
}

func (rep *report) printTrials(w io.Writer) {
	fmt.Fprintf(w, "\n## Every trial\n\nElections: times from the cancel, the client's close or the new candidate's Run.\n\n")
	fmt.Fprintf(w, "| kind | trial | next leads, in its view | every view | old key gone from its view | old leader stopped | joiner sees itself stand | samples with two leaders | error |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, kind := range []string{graceful, crash, runoff} {
		for i, t := range rep.elections[kind] {
			self := "–"
			if kind == runoff {
				self = ms(t.self)
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %d | %s |\n", kind, i, ms(t.took), ms(t.all), ms(t.gone), ms(t.old), self, t.twice, errText(t.err))
		}
	}
	if len(rep.outages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nOutages: the loss from the first StopMember call; the return from RestartMember's return (negative: before it). Nodes a, b.\n\n")
	fmt.Fprintf(w, "| trial | endpoints | sessions | StopMember returned | etcd lost | outage mode | from the loss | from the first probe (est.) | creating | RestartMember took | etcd back | out of outage mode | launches at a meanwhile | written | conflicts | error |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, t := range rep.outages {
		eps := "the survivor"
		if t.allEPs {
			eps = "all three"
		}
		fmt.Fprintf(w, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %s |\n", i, eps, t.sessions, ms(t.stopRet), msOK(t.lost, t.lostOK),
			msList(t.in), msList(t.inLost), msList(t.inProbe), ms(t.create), ms(t.restart), msOK(t.back, t.backOK), msList(t.out), fmt.Sprintf("%d, longest %s", t.launches, ms(t.late)), t.written, t.conflicts, errText(t.err))
	}
}

// ms formats d in milliseconds; a negative one (not measured) as "–".
func ms(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func msList(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = msSigned(d)
	}
	return strings.Join(s, ", ")
}

// msSigned formats d in milliseconds, negative ones too.
func msSigned(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return ms(d)
}

// msOK formats d, signed, when ok; "–" otherwise.
func msOK(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	return msSigned(d)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "|", "/")
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
