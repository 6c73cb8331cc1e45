package etcd

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Candidate is what a node stands for election with.
type Candidate struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Zone is the zone it stands in.
	Zone string `json:"zone"`
	// Version is its software version: newer versions lead.
	Version string `json:"version"`
	// Preference is its election_preference: most_preferred, preferred, default or
	// not_preferred.
	Preference string `json:"preference"`
}

var preferenceRank = map[string]int{"most_preferred": 0, "preferred": 1, "default": 2, "": 2, "not_preferred": 3}

// Before reports whether candidate a ranks before b: a newer version, then a stronger
// election preference, then a smaller name.
func Before(a, b Candidate) bool { return compareCandidates(a, b) < 0 }

func compareCandidates(a, b Candidate) int {
	if c := compareVersions(b.Version, a.Version); c != 0 {
		return c
	}
	if c := cmp.Compare(preferenceRank[a.Preference], preferenceRank[b.Preference]); c != 0 {
		return c
	}
	return cmp.Compare(a.Node, b.Node)
}

// compareVersions orders software versions: dotted numbers compared as numbers ("v" prefix
// optional), a release after its pre-releases ("1.2.0" > "1.2.0-rc1"), and any version
// before it parses ("dev") older than every numbered one.
func compareVersions(a, b string) int {
	na, ra, oka := splitVersion(a)
	nb, rb, okb := splitVersion(b)
	switch {
	case !oka || !okb:
		if oka != okb {
			if oka {
				return 1
			}
			return -1
		}
		return cmp.Compare(a, b)
	}
	if c := slices.Compare(na, nb); c != 0 {
		return c
	}
	switch {
	case ra == rb:
		return 0
	case ra == "":
		return 1
	case rb == "":
		return -1
	}
	return cmp.Compare(ra, rb)
}

func splitVersion(v string) (nums []int, rest string, ok bool) {
	v = strings.TrimPrefix(v, "v")
	core, rest, _ := strings.Cut(v, "-")
	core, _, _ = strings.Cut(core, "+")
	for f := range strings.SplitSeq(core, ".") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, "", false
		}
		nums = append(nums, n)
	}
	for len(nums) < 3 {
		nums = append(nums, 0)
	}
	return nums, rest, true
}
