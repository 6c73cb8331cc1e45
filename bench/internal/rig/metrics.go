package rig

import (
	"strconv"
	"strings"
)

// ParseMetrics adds the samples of a Prometheus text exposition to out, keyed by prefix, the
// metric's name and its labels as written (`frontdoor_x{kind="tls"}`); comments and lines
// without a value are skipped.
func ParseMetrics(text, prefix string, out map[string]float64) {
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[prefix+line[:i]] += v
		}
	}
}
