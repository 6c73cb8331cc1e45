package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/wire"
)

// DNSSECKeys holds the signed GSLB domains' keys and rolls them over.
type DNSSECKeys interface {
	// DNSSECDomains describes every signed domain's keys.
	DNSSECDomains(ctx context.Context) ([]wire.DNSSECDomain, error)
	// DNSSECRollover takes a step of a rollover of domain's key: it adds a new key, or with
	// finish retires the old one. A domain that is not signed wraps ErrNotSigned, a step
	// that does not fit the state of the domain's keys ErrRefused.
	DNSSECRollover(ctx context.Context, domain string, finish bool) (wire.DNSSECDomain, error)
}

// ErrNotSigned is a DNSSEC request for a domain that is not a GSLB domain signed with DNSSEC.
var ErrNotSigned = errors.New("not a GSLB domain signed with DNSSEC")

func (a *Admin) dnssecList(w http.ResponseWriter, r *http.Request) {
	if a.o.DNSSEC == nil {
		httpError(w, http.StatusNotImplemented, "this front door signs no GSLB domain")
		return
	}
	ds, err := a.o.DNSSEC.DNSSECDomains(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if ds == nil {
		ds = []wire.DNSSECDomain{}
	}
	writeJSON(w, http.StatusOK, ds)
}

func (a *Admin) dnssecRollover(w http.ResponseWriter, r *http.Request) {
	if a.o.DNSSEC == nil {
		httpError(w, http.StatusNotImplemented, "this front door signs no GSLB domain")
		return
	}
	var req wire.DNSSECRolloverRequest
	if !readJSON(w, r, &req, 1<<10, `body must be JSON {"domain": NAME, "finish": BOOL}`) {
		return
	}
	if strings.TrimSpace(req.Domain) == "" {
		httpError(w, http.StatusBadRequest, "domain: missing")
		return
	}
	d, err := a.o.DNSSEC.DNSSECRollover(r.Context(), req.Domain, req.Finish)
	if err != nil {
		actionError(w, err)
		return
	}
	action, detail := "dnssec.rollover", ""
	if req.Finish {
		action = "dnssec.rollover.finish"
	}
	for _, k := range d.Keys {
		detail += fmt.Sprintf("key %d %s; ", k.Tag, k.State)
	}
	detail = strings.TrimSuffix(detail, "; ")
	a.log.Info("DNSSEC key rolled over", "by", adminOf(r), "domain", d.Domain, "finish", req.Finish, "keys", detail)
	a.record(r, action, d.Domain, detail)
	writeJSON(w, http.StatusOK, d)
}
