package wire

// The admin API's request bodies, which the CLI, the drills and the tests send (package
// client/admin) and the admin API reads.

// ToggleRequest is the body of POST /v1/admin/gateway.
type ToggleRequest struct {
	On    bool   `json:"on"`
	Group string `json:"group"` // "" for every group
}

// OverrideRequest is the body of POST /v1/admin/health.
type OverrideRequest struct {
	Gateway  string `json:"gateway"`
	Override string `json:"override"` // up, down, drain or auto (health.ParseOverride)
}

// RotateCARequest is the body of POST /v1/admin/rotate-ca.
type RotateCARequest struct {
	Step string `json:"step"` // "start", "issue" or "retire" (pki.CAStart, CAIssue, CARetire)
}

// DNSSECRolloverRequest is the body of POST /v1/admin/dnssec/rollover.
type DNSSECRolloverRequest struct {
	Domain string `json:"domain"`
	// Finish retires the old key of a rollover under way; without it a rollover starts.
	Finish bool `json:"finish,omitempty"`
}
