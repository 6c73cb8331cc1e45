package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// readJSON decodes r's body, of at most limit bytes, into v. It answers 413 for a longer
// body and 400 with usage for one that is not the JSON asked for, and then returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any, limit int64, usage string) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit)).Decode(v)
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body longer than %d bytes", limit))
		return false
	case err != nil:
		httpError(w, http.StatusBadRequest, usage)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
