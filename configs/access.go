package configs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// UnmapRange returns the IPv4 range an IPv4-mapped IPv6 range of length 96 or more means
// (::ffff:10.0.0.0/104 is 10.0.0.0/8), and any other range as it is: clients' addresses
// are matched unmapped.
func UnmapRange(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Window is the parsed Hours of an access rule: minutes after midnight, start included,
// end excluded. All is set when the rule sets no hours.
type Window struct {
	All        bool
	Start, End int
}

// ParseHours parses "HH:MM-HH:MM" ("" is all day).
func ParseHours(s string) (Window, error) {
	if s == "" {
		return Window{All: true}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return Window{}, fmt.Errorf("hours %q: want HH:MM-HH:MM, e.g. 08:00-18:00", s)
	}
	start, err1 := time.Parse("15:04", strings.TrimSpace(a))
	end, err2 := time.Parse("15:04", strings.TrimSpace(b))
	if err1 != nil || err2 != nil {
		return Window{}, fmt.Errorf("hours %q: want HH:MM-HH:MM, e.g. 08:00-18:00", s)
	}
	w := Window{Start: start.Hour()*60 + start.Minute(), End: end.Hour()*60 + end.Minute()}
	if w.Start == w.End {
		return Window{}, fmt.Errorf("hours %q: the window is empty (for all day, leave hours out)", s)
	}
	return w, nil
}

// Covers says whether the window holds at t's local time of day on a day in days (a set
// of time.Weekday; empty is every day). A window past midnight counts on the day it
// starts: the small hours count for the day before.
func (w Window) Covers(t time.Time, days []time.Weekday) bool {
	day := t.Weekday()
	in := func(d time.Weekday) bool { return len(days) == 0 || slices.Contains(days, d) }
	if w.All {
		return in(day)
	}
	m := t.Hour()*60 + t.Minute()
	if w.Start < w.End {
		return m >= w.Start && m < w.End && in(day)
	}
	switch {
	case m >= w.Start:
		return in(day)
	case m < w.End:
		return in((day + 6) % 7) // the window began the day before
	}
	return false
}

// ParseDays returns the weekdays of an access rule's Days: sun, mon, ... sat.
func ParseDays(days []string) ([]time.Weekday, error) {
	var out []time.Weekday
next:
	for _, d := range days {
		var names []string
		for w := time.Sunday; w <= time.Saturday; w++ {
			if dayName(w) == strings.ToLower(d) {
				out = append(out, w)
				continue next
			}
			names = append(names, dayName(w))
		}
		return nil, fmt.Errorf("day %q is not one of %s", d, strings.Join(names, ", "))
	}
	return out, nil
}

// dayName is a day's name in Days: the first three letters of its English name, lower case.
func dayName(w time.Weekday) string { return strings.ToLower(w.String()[:3]) }
