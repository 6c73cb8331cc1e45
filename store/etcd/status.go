package etcd

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Member is one etcd member as the store sees it.
type Member struct {
	// Name is the member's name.
	Name string `json:"name"`
	// Endpoint is the client URL it was asked on.
	Endpoint string `json:"endpoint"`
	// Healthy reports whether it answered a status request.
	Healthy bool `json:"healthy"`
	// Leader reports whether it is the raft leader.
	Leader bool `json:"leader"`
	// Revision is the member's store revision.
	Revision int64 `json:"revision"`
	// RTT is how long the status request took.
	RTT string `json:"rtt"`
	// Error says why it did not answer.
	Error string `json:"error,omitempty"`
}

// Status describes the store for `frontdoor admin status`.
type Status struct {
	// Backend is "etcd".
	Backend string `json:"backend"`
	// Prefix is the site's key prefix.
	Prefix string `json:"prefix"`
	// Revision is the revision this node's view reflects.
	Revision int64 `json:"revision"`
	// Members are the cluster's members.
	Members []Member `json:"members"`
	// Nodes are the running nodes of the site.
	Nodes []NodeInfo `json:"nodes"`
	// Leaders are the zones' leaders, by zone name.
	Leaders []Leader `json:"leaders"`
	// Outage is the local host cache's outage mode.
	Outage OutageStatus `json:"outage"`
	// Registrations tell, by machine, the node its agent reports to.
	Registrations map[string]Registration `json:"registrations"`
	// Error says why the members could not be listed.
	Error string `json:"error,omitempty"`
}

// Status asks every member of the cluster for its status, bounded by ctx.
func (h Presence) Status(ctx context.Context) Status {
	st := h.st
	out := Status{Backend: "etcd", Prefix: st.o.Prefix, Revision: st.revision()}
	for _, n := range h.Nodes() {
		out.Nodes = append(out.Nodes, n)
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	out.Registrations = h.Registrations()
	out.Outage = st.Outage().Status()
	out.Leaders = []Leader{}
	for _, l := range st.Election().Leaders() {
		out.Leaders = append(out.Leaders, l)
	}
	sort.Slice(out.Leaders, func(i, j int) bool { return out.Leaders[i].Zone < out.Leaders[j].Zone })
	if st.outage.Load() {
		out.Error = "the site database is out of reach: this node is in outage mode"
		return out
	}
	ml, err := st.cli.MemberList(ctx)
	if err != nil {
		out.Error = fmt.Sprintf("listing members: %v", err)
		return out
	}
	for _, m := range ml.Members {
		mb := Member{Name: m.Name}
		if len(m.ClientURLs) > 0 {
			mb.Endpoint = m.ClientURLs[0]
			start := time.Now()
			s, err := st.cli.Status(ctx, mb.Endpoint)
			mb.RTT = time.Since(start).Round(time.Microsecond).String()
			if err != nil {
				mb.Error = err.Error()
			} else {
				mb.Healthy, mb.Leader, mb.Revision = true, s.Leader == m.ID, s.Header.Revision
			}
		}
		out.Members = append(out.Members, mb)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	return out
}

// Registration is where a machine's agent reports: the node (and its zone) whose lease holds
// the machine's load, as of its last report.
type Registration struct {
	Node     string    `json:"node"`
	Zone     string    `json:"zone"`
	Reported time.Time `json:"reported"`
}

// Registrations returns where every reporting machine is registered, from the view.
func (h Presence) Registrations() map[string]Registration {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]Registration, len(st.loads))
	for m, l := range st.loads {
		if l.Node != "" {
			out[m] = Registration{Node: l.Node, Zone: l.Zone, Reported: l.Reported}
		}
	}
	return out
}
