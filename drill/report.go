package drill

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
)

// WriteTable prints the seed's table: criterion, mode, expected, actual, time until the
// client saw the cut, time until it was back, same session, pass.
func WriteTable(w io.Writer, rep Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CRITERION\tSECURE GATEWAY\tEXPECTED\tACTUAL\tCUT SEEN\tBACK IN DESKTOP\tSAME SESSION\tVIEWER KEPT\tLONGEST STALL\tKEYS LOST/DOUBLED\tSAME SESSION DRAWN\tRESULT")
	for _, r := range rep.Results {
		cut, back, same := "-", "-", "-"
		for _, c := range r.Clients {
			if !c.Affected || !c.Cut {
				continue
			}
			cut = fmt.Sprintf("%.2f s", c.CutAfter.Seconds())
			if c.Back {
				back = fmt.Sprintf("%.2f s", c.BackAfter.Seconds())
				same = yesNo(c.SameSession)
			} else {
				back = "never"
			}
			break
		}
		if (r.Mode == "direct" || r.Quiet) && cut == "-" {
			cut, back, same = "no cut", "n/a", "yes"
		}
		mode := map[string]string{"gateway": "ticked", "direct": "unticked"}[r.Mode]
		v := viewerOf(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Criterion, mode, r.Expected, r.Actual, cut, back, same,
			v.kept, v.stall, v.keys, v.drawn, passWord(r.Pass))
	}
	tw.Flush()
}

// viewerCols are a row's viewer columns, over its affected clients (every client when none
// was affected): the viewers' connections all kept, their longest stall, the keys that came
// out of order, the same session drawn by every desktop.
type viewerCols struct{ kept, stall, keys, drawn string }

func viewerOf(r Result) viewerCols {
	cs := r.Clients
	if slices.ContainsFunc(cs, func(c ClientResult) bool { return c.Affected }) {
		cs = slices.DeleteFunc(slices.Clone(cs), func(c ClientResult) bool { return !c.Affected })
	}
	if len(cs) == 0 {
		return viewerCols{"-", "-", "-", "-"}
	}
	kept, drawn, keys := true, true, 0
	var stall time.Duration
	for _, c := range cs {
		kept = kept && c.ViewerKept
		drawn = drawn && c.SameDrawn
		keys += c.KeysOutOfOrder
		stall = max(stall, c.LongestStall)
	}
	return viewerCols{yesNo(kept), fmt.Sprintf("%.2f s", stall.Seconds()), fmt.Sprint(keys), yesNo(drawn)}
}

// WriteNotes prints, once per scenario of the report, how the lab realises its failure.
func WriteNotes(w io.Writer, rep Report) {
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if r.Note == "" || seen[r.Scenario] {
			continue
		}
		seen[r.Scenario] = true
		fmt.Fprintf(w, "  %s: %s.\n", r.Scenario, r.Note)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// WriteFiles writes report.json and report.html (a timeline picture per scenario) into dir.
func WriteFiles(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return WriteHTML(f, rep)
}

// lane is one client's row of a timeline picture: spans of up and cut time.
type lane struct {
	User  string
	Spans []span
	Marks []mark
}

type span struct {
	X, W  float64
	Class string
	Title string
}

type mark struct {
	X     float64
	Title string
}

type picture struct {
	Result
	Lanes  []lane
	Width  float64
	FaultX float64
	Ticks  []mark
	Table  string
}

const (
	picWidth = 900.0
	laneH    = 26
	// maxTimeline bounds the span a timeline shows (and its ticks, one a second).
	maxTimeline = 10 * time.Minute
)

// timeline lays out one result's client timelines from start to end.
func timeline(r Result) picture {
	p := picture{Result: r, Width: picWidth}
	fault := r.FaultAt
	if fault.IsZero() {
		// No failure was injected (the drill failed before it): the run's own span. From the
		// zero time the ticks were one a second over two thousand years, and the page's
		// writer ran the process out of memory.
		fault = r.Start.Add(time.Second)
	}
	t0 := fault.Add(-time.Second)
	t1 := r.End
	if !t1.After(t0) || t1.Sub(t0) > maxTimeline {
		t1 = t0.Add(min(maxTimeline, max(time.Second, t1.Sub(t0))))
	}
	scale := picWidth / t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 { return max(0, min(picWidth, t.Sub(t0).Seconds()*scale)) }
	p.FaultX = x(fault)
	for s := 0.0; s <= t1.Sub(t0).Seconds(); s++ {
		p.Ticks = append(p.Ticks, mark{X: s * scale, Title: fmt.Sprintf("%+.0fs", s-1)})
	}
	for _, c := range r.Clients {
		l := lane{User: c.User}
		state, since := "up", t0
		for _, ev := range c.Events {
			if ev.At.Before(t0) {
				continue
			}
			switch ev.Kind {
			case client.EventCut, client.EventLost:
				if state == "up" {
					l.Spans = append(l.Spans, span{X: x(since), W: x(ev.At) - x(since), Class: "up", Title: "in the desktop"})
					state, since = "cut", ev.At
				}
			case client.EventBack, client.EventUp:
				if state == "cut" {
					l.Spans = append(l.Spans, span{X: x(since), W: x(ev.At) - x(since), Class: "cut",
						Title: fmt.Sprintf("cut %.2f s", ev.At.Sub(since).Seconds())})
					state, since = "up", ev.At
				}
			}
			l.Marks = append(l.Marks, mark{X: x(ev.At), Title: ev.String()})
		}
		l.Spans = append(l.Spans, span{X: x(since), W: x(t1) - x(since), Class: state, Title: state})
		p.Lanes = append(p.Lanes, l)
	}
	return p
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"laneY":  func(i int) int { return 30 + i*laneH },
	"height": func(n int) int { return 40 + n*laneH },
	"secs":   func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>frontdoor failure drill</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}
.PASS{color:#186a1e;font-weight:bold}.MISS{color:#b00020;font-weight:bold}
rect.up{fill:#4caf50}rect.cut{fill:#e53935}line.fault{stroke:#000;stroke-dasharray:4 3}
text{font-size:12px}circle{fill:#222}
</style></head><body>
<h1>frontdoor failure drill</h1>
<p>Started {{.Started.Format "2006-01-02 15:04:05"}}. Green: the client is in its desktop; red: cut. The dashed line is the failure.</p>
<table><tr><th>Criterion</th><th>Secure gateway</th><th>Expected</th><th>Actual</th><th>Result</th></tr>
{{range .Pictures}}<tr><td>{{.Criterion}}</td><td>{{if eq .Mode "gateway"}}ticked{{else}}unticked{{end}}</td><td>{{.Expected}}</td><td>{{.Actual}}</td><td class="{{if .Pass}}PASS{{else}}MISS{{end}}">{{if .Pass}}PASS{{else}}MISS{{end}}</td></tr>
{{end}}</table>
{{range .Pictures}}
<h2>{{.Scenario}} — secure gateway {{if eq .Mode "gateway"}}on{{else}}off{{end}}</h2>
<p>{{.Criterion}}. Failed: {{.Target}}. {{.Actual}}</p>
{{if .Note}}<p><small>How the lab does it: {{.Note}}.</small></p>{{end}}
<svg width="{{.Width}}" height="{{height (len .Lanes)}}" xmlns="http://www.w3.org/2000/svg" style="overflow:visible;margin-left:60px">
{{range .Ticks}}<text x="{{.X}}" y="12">{{.Title}}</text>{{end}}
{{range $i, $l := .Lanes}}<text x="-55" y="{{laneY $i}}" dy="14">{{$l.User}}</text>
{{range $l.Spans}}<rect class="{{.Class}}" x="{{.X}}" y="{{laneY $i}}" width="{{.W}}" height="18"><title>{{.Title}}</title></rect>{{end}}
{{range $l.Marks}}<circle cx="{{.X}}" cy="{{laneY $i}}" r="2.5"><title>{{.Title}}</title></circle>{{end}}
{{end}}<line class="fault" x1="{{.FaultX}}" x2="{{.FaultX}}" y1="16" y2="{{height (len .Lanes)}}"/>
</svg>
<table><tr><th>Client</th><th>Session</th><th>Via before</th><th>Via after</th><th>Cut seen</th><th>Back</th><th>Same session</th><th>Viewer kept</th><th>Longest stall</th><th>Keys lost/doubled</th><th>Desktop drew</th></tr>
{{range .Clients}}<tr><td>{{.User}}</td><td>{{.Session}}</td><td>{{.ViaBefore}}</td><td>{{.ViaAfter}}</td><td>{{if .Cut}}{{secs .CutAfter}}{{else}}no cut{{end}}</td><td>{{if .Back}}{{secs .BackAfter}}{{else}}-{{end}}</td><td>{{if .Back}}{{.SameSession}}{{else}}-{{end}}</td><td>{{.ViewerKept}}</td><td>{{secs .LongestStall}}</td><td>{{.KeysOutOfOrder}}</td><td>{{if .SameDrawn}}same session{{else}}other session{{end}}, {{.DrawnPath}}</td></tr>
{{end}}</table>
{{end}}
</body></html>
`))

// WriteHTML writes the report page with a timeline picture per scenario.
func WriteHTML(w io.Writer, rep Report) error {
	var pics []picture
	for _, r := range rep.Results {
		pics = append(pics, timeline(r))
	}
	return page.Execute(w, map[string]any{"Started": rep.Started, "Pictures": pics})
}

// Summary is one line for the whole drill.
func Summary(rep Report) string {
	pass := 0
	for _, r := range rep.Results {
		if r.Pass {
			pass++
		}
	}
	return strings.TrimSpace(fmt.Sprintf("%d passed, %d missed", pass, len(rep.Results)-pass))
}
