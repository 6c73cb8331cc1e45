package api

import (
	"errors"
	"mime"
	"net/http"
)

// Refusals of writes a browser may have sent for another site (cross-site request forgery).
var (
	errCrossSite = errors.New("a write sent from another site is refused")
	errFormBody  = errors.New("this API takes JSON: a form's or a plain-text body is refused")
)

// crossSiteWrite reports, with the status to answer, why a state-changing request is refused
// whatever credential rides with it — a browser's cached Basic login, a client certificate,
// a smart card —, nil for a read: one a browser says came from another site (Sec-Fetch-Site:
// cross-site, or an Origin or Referer that is not this host over https), and one whose body
// is of the types a page of another site may post without asking (a form or plain text).
// Clients that are not browsers send neither header and JSON or no body.
func crossSiteWrite(r *http.Request) (int, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 0, nil
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" || !sameOrigin(r) {
		return http.StatusForbidden, errCrossSite
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		switch mt {
		case "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
			return http.StatusUnsupportedMediaType, errFormBody
		}
	}
	return 0, nil
}
