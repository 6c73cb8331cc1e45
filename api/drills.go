package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
)

// Drill reports (`frontdoor drill --report DIR` writes DIR/report.json) uploaded to a front
// door: kept in its DrillDir, one file <id>.json each, for the console's Drills page. They
// are this front door's: another front door of the site holds those uploaded to it.

const (
	// maxDrillReport bounds an uploaded report (a drill of every scenario in both modes is
	// about 80 KB).
	maxDrillReport = 4 << 20
	// maxDrillReports bounds the reports a front door keeps.
	maxDrillReports = 200
	// maxDrillRows bounds the rows of one report.
	maxDrillRows = 1000
)

// drillID is the form of a report's id: its start (UTC) and a digest of its content.
var drillID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$`)

// drillReport is what the API reads of a drill report (drill.Report's JSON) to check it and
// list it; the report is kept whole, as it came.
type drillReport struct {
	Started time.Time     `json:"started"`
	Results []drillResult `json:"results"`
}

type drillResult struct {
	Scenario  string `json:"scenario"`
	Mode      string `json:"mode"`
	Criterion string `json:"criterion"`
	Expected  string `json:"expected"`
	Actual    string `json:"actual"`
	Pass      bool   `json:"pass"`
}

// DrillSummary is one report in GET /v1/admin/drills.
type DrillSummary struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
	// Passed: every row passed (drill.Report.Passed).
	Passed bool `json:"passed"`
	// Rows counts the report's results: one per scenario and secure-gateway mode.
	Rows int `json:"rows"`
	// Received is when this front door was given it.
	Received time.Time `json:"received"`
}

// parseDrillReport checks that b is a drill report: a start time and 1 to maxDrillRows
// results, each naming its scenario and a mode of gateway or direct.
func parseDrillReport(b []byte) (drillReport, error) {
	var rep drillReport
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rep); err != nil {
		return rep, fmt.Errorf("not a drill report (report.json of frontdoor drill --report): %v", err)
	}
	if dec.More() {
		return rep, errors.New("not a drill report: more than one JSON value")
	}
	switch {
	case rep.Started.IsZero():
		return rep, errors.New("not a drill report: no started time")
	case len(rep.Results) == 0:
		return rep, errors.New("not a drill report: no results")
	case len(rep.Results) > maxDrillRows:
		return rep, fmt.Errorf("a drill report of %d rows: at most %d", len(rep.Results), maxDrillRows)
	}
	for i, r := range rep.Results {
		if r.Scenario == "" || (r.Mode != "gateway" && r.Mode != "direct") {
			return rep, fmt.Errorf("not a drill report: results[%d] has no scenario or a mode other than gateway or direct", i)
		}
	}
	return rep, nil
}

func (rep drillReport) passed() bool {
	return !slices.ContainsFunc(rep.Results, func(r drillResult) bool { return !r.Pass })
}

func (a *Admin) drillsReady(w http.ResponseWriter) bool {
	if a.o.DrillDir == "" {
		httpError(w, http.StatusNotImplemented, "this front door keeps no drill reports")
		return false
	}
	return true
}

// drillList serves GET /v1/admin/drills: the reports this front door holds, the newest start
// first.
func (a *Admin) drillList(w http.ResponseWriter, _ *http.Request) {
	if !a.drillsReady(w) {
		return
	}
	out, err := a.drillSummaries()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// drillCache keeps the summaries of the reports drillSummaries read, by file name, with
// the size and time of the file read: a list parses only the reports that came or changed
// since the last (a report may be 4 MiB, and 200 are kept).
type drillCache struct {
	mu     sync.Mutex // guards byName and parses
	byName map[string]cachedDrill
	parses int // reports parsed, for tests
}

// cachedDrill is a report's summary as of its file's size and time.
type cachedDrill struct {
	size    int64
	mod     time.Time
	summary DrillSummary
	ok      bool // a drill report; else the file is skipped
}

func (a *Admin) drillSummaries() ([]DrillSummary, error) {
	ents, err := os.ReadDir(a.o.DrillDir)
	if errors.Is(err, fs.ErrNotExist) {
		return []DrillSummary{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the drill reports: %w", err)
	}
	c := &a.drills
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]cachedDrill{}
	out := []DrillSummary{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !drillID.MatchString(id) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		d, hit := c.byName[e.Name()]
		if !hit || d.size != info.Size() || !d.mod.Equal(info.ModTime()) {
			d = cachedDrill{size: info.Size(), mod: info.ModTime()}
			b, err := os.ReadFile(filepath.Join(a.o.DrillDir, e.Name()))
			if err != nil {
				continue
			}
			c.parses++
			if rep, err := parseDrillReport(b); err == nil {
				d.summary = DrillSummary{ID: id, Started: rep.Started.UTC(), Passed: rep.passed(), Rows: len(rep.Results), Received: info.ModTime().UTC()}
				d.ok = true
			}
		}
		seen[e.Name()] = d
		if d.ok {
			out = append(out, d.summary)
		}
	}
	c.byName = seen
	slices.SortFunc(out, func(x, y DrillSummary) int {
		if c := y.Started.Compare(x.Started); c != 0 {
			return c
		}
		return strings.Compare(y.ID, x.ID)
	})
	return out, nil
}

// drillGet serves GET /v1/admin/drills/{id}: the report as it was uploaded (drill.Report's
// JSON: started, results with their clients and events).
func (a *Admin) drillGet(w http.ResponseWriter, r *http.Request) {
	if !a.drillsReady(w) {
		return
	}
	id := r.PathValue("id")
	if !drillID.MatchString(id) {
		httpError(w, http.StatusNotFound, "no such drill report")
		return
	}
	b, err := os.ReadFile(filepath.Join(a.o.DrillDir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		httpError(w, http.StatusNotFound, "no such drill report")
		return
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// drillUpload serves POST /v1/admin/drills, a drill report.json as the body (at most 4 MiB):
// checked as a drill report and kept, under an id of its start and content (the same report
// twice is kept once). It answers the report's DrillSummary, 201 when it is new.
func (a *Admin) drillUpload(w http.ResponseWriter, r *http.Request) {
	if !a.drillsReady(w) {
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDrillReport))
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a drill report of more than %d bytes", maxDrillReport))
		return
	case err != nil:
		httpError(w, http.StatusBadRequest, "reading the report: "+err.Error())
		return
	}
	rep, err := parseDrillReport(b)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	sum := sha256.Sum256(b)
	id := rep.Started.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(sum[:6])
	s := DrillSummary{ID: id, Started: rep.Started.UTC(), Passed: rep.passed(), Rows: len(rep.Results), Received: time.Now().UTC()}
	file := filepath.Join(a.o.DrillDir, id+".json")
	if info, err := os.Stat(file); err == nil {
		s.Received = info.ModTime().UTC()
		writeJSON(w, http.StatusOK, s)
		return
	}
	if have, err := a.drillSummaries(); err == nil && len(have) >= maxDrillReports {
		httpError(w, http.StatusInsufficientStorage, fmt.Sprintf("this front door holds %d drill reports already: remove old ones from %s", len(have), a.o.DrillDir))
		return
	}
	if err := os.MkdirAll(a.o.DrillDir, 0o700); err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := atomicfile.Write(file, b, 0o600); err != nil {
		httpError(w, http.StatusInternalServerError, "keeping the report: "+err.Error())
		return
	}
	verdict := "passed"
	if !s.Passed {
		verdict = "failed"
	}
	a.log.Info("drill report uploaded", "by", adminOf(r), "id", id, "rows", s.Rows, "passed", s.Passed)
	a.record(r, "drill.upload", id, fmt.Sprintf("drill of %s, %d rows, %s", s.Started.Format(time.RFC3339), s.Rows, verdict))
	writeJSON(w, http.StatusCreated, s)
}
