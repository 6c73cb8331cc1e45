package api

import (
	"fmt"
	"net/http"

	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/wire"
)

func (a *Admin) caShow(w http.ResponseWriter, r *http.Request) {
	if a.o.CA == nil {
		httpError(w, http.StatusNotImplemented, "this front door holds no site CA")
		return
	}
	st, err := a.o.CA(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *Admin) rotateCA(w http.ResponseWriter, r *http.Request) {
	if a.o.RotateCA == nil {
		httpError(w, http.StatusNotImplemented, "this front door holds no site CA")
		return
	}
	var req wire.RotateCARequest
	if !readJSON(w, r, &req, 1<<10, `body must be JSON {"step": "start"|"issue"|"retire"}`) {
		return
	}
	if req.Step != pki.CAStart && req.Step != pki.CAIssue && req.Step != pki.CARetire {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("step %q: want start, issue or retire", req.Step))
		return
	}
	st, err := a.o.RotateCA(r.Context(), req.Step)
	if err != nil {
		actionError(w, err)
		return
	}
	detail := "issuing " + st.Issuing.Subject + " (sha256 " + st.Issuing.SHA256[:16] + "…)"
	if len(st.Trusted) > 1 {
		detail += "; also trusted " + st.Trusted[1].Subject + " (sha256 " + st.Trusted[1].SHA256[:16] + "…)"
	}
	a.log.Info("site CA rotation", "by", adminOf(r), "step", req.Step, "issuing", st.Issuing.SHA256, "trusted", len(st.Trusted))
	a.record(r, "ca.rotate."+req.Step, "site CA", detail)
	writeJSON(w, http.StatusOK, st)
}
