package client

import (
	"testing"
	"time"
)

// A session's streams wait for the machine as long as the site keeps them (the descriptor's
// desktop.reliability_timeout_seconds), and reconnecting goes on that long too; an Options
// value set by the program wins.
func TestTheSitesReliabilityTimeoutIsTheClients(t *testing.T) {
	for _, tc := range []struct {
		name         string
		seconds      int
		set          time.Duration
		want, giveUp time.Duration
	}{
		{"none said: 180 s", 0, 0, 180 * time.Second, 180 * time.Second},
		{"the site's 10 minutes", 600, 0, 10 * time.Minute, 10 * time.Minute},
		{"the site's 30 s: reconnecting still goes on 2 minutes", 30, 0, 30 * time.Second, 2 * time.Minute},
		{"the program's own", 600, 5 * time.Second, 5 * time.Second, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Descriptor: &Descriptor{Desktop: &DesktopInfo{Protocol: "builtin", ReliabilitySeconds: tc.seconds}}, ReliabilityTimeout: tc.set}
			if err := o.setDefaults(); err != nil {
				t.Fatal(err)
			}
			if o.ReliabilityTimeout != tc.want || o.GiveUpAfter != tc.giveUp {
				t.Fatalf("reliability %v, give up after %v; want %v and %v", o.ReliabilityTimeout, o.GiveUpAfter, tc.want, tc.giveUp)
			}
		})
	}
}
