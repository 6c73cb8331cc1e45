package broker

import (
	"fmt"
	"strings"
)

// Text is the decision as `frontdoor explain` prints it: outcome, step, preferred zone,
// machine or reason, and the trace, a line each.
func (d Decision) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "outcome: %s\n", d.Outcome)
	if d.StepLabel != "" {
		fmt.Fprintf(&b, "step: %s\n", d.StepLabel)
	} else {
		fmt.Fprintf(&b, "step: %d\n", d.Step)
	}
	if d.PreferredZone != "" {
		fmt.Fprintf(&b, "preferred zone: %s (%s)\n", d.PreferredZone, d.PreferredZoneSource)
	} else {
		b.WriteString("preferred zone: none\n")
	}
	if d.Outcome == OutcomeDenied {
		fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	} else {
		fmt.Fprintf(&b, "machine: %s (%s)\n", d.Machine, d.Address)
		fmt.Fprintf(&b, "zone: %s\n", d.Zone)
		if d.Site != "" {
			fmt.Fprintf(&b, "site: %s\n", d.Site)
		}
		session := d.Session
		if session == "" {
			session = "(new)"
		}
		fmt.Fprintf(&b, "session: %s\n", session)
		fmt.Fprintf(&b, "mode: %s\n", d.Mode)
		if d.Stolen {
			fmt.Fprintf(&b, "stolen from endpoint: %s\n", d.PreviousEndpoint)
		}
	}
	b.WriteString("trace:\n")
	for _, l := range d.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
