package api

import (
	"net/http"

	"github.com/frontdoor-vdi/frontdoor/logins"
)

// loginRefused answers a failed authentication: 429 with Retry-After when throttled, 503
// when the comparisons are all busy, one-time codes or a client certificate's revocation
// cannot be checked or no RADIUS server answers, else 401 with the realm's challenge (and
// the error's words: an Access-Challenge says what is not supported).
func loginRefused(w http.ResponseWriter, err error, realm string) {
	code := logins.Status(w, err)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
	}
	httpError(w, code, err.Error())
}
