package lab

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

// TestLabStartsAndStopsQuietly starts the lab and stops it as Ctrl-C stops `frontdoor lab`,
// and reads every log line it wrote: none is an error (a new etcd member's storage version
// race, which etcd mends by itself, is an info), and no agent warns at the stop (the agents
// stop reporting before the front doors stop, so none reports to a front door that is gone).
func TestLabStartsAndStopsQuietly(t *testing.T) {
	logs := &testbuf.Buffer{}
	_, stop, served := startLabWith(t, Options{Config: testSite(t, nil), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	started := len(logs.String())
	stop()
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the lab still runs 30s after its stop")
	}
	out := logs.String()
	atStart := strings.Count(out[:started], "\n") // the lines written before the stop
	for i, line := range strings.Split(out, "\n") {
		when := "while the lab started"
		if i >= atStart {
			when = "while the lab stopped"
		}
		switch {
		case strings.Contains(line, "level=ERROR"):
			t.Errorf("an error %s: %s", when, line)
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "component=agent"):
			t.Errorf("an agent warned %s: %s", when, line)
		}
	}
}
