package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Rotating the site CA, in three steps, as every party of the site must trust a CA before a
// certificate of it reaches them, and must stop trusting the old one only once nothing of it
// is left:
//
//  1. start: a new CA is made. Every front door, gateway and agent trusts it beside the old
//     one, which still issues. Clients get the two in ca.pem.
//  2. issue: the new CA issues: the listeners' and the gateways' certificates are issued
//     anew, and the agents renew theirs. The old CA is still trusted.
//  3. retire: the old CA is trusted no more.
//
// A step waits CAStepWait after the one before, for every front door and agent to follow.

// CAStepWait is the least time between two steps of a rotation of the site CA: a front door
// rereads the site identity every 5 s, an agent the site's CA every 10 s.
const CAStepWait = 30 * time.Second

// ErrCARotation is a step of a rotation of the site CA that does not fit the rotation's
// state, or comes too soon after the one before.
var ErrCARotation = errors.New("CA rotation")

// The steps of a rotation, as the admin API takes them.
const (
	CAStart  = "start"
	CAIssue  = "issue"
	CARetire = "retire"
)

// CAState is the site CA as the site keeps it: the CA that issues and, while the CA is
// rotated, the other one.
type CAState struct {
	Cert, Key []byte      // the CA that issues, PEM
	Rotation  *CARotation // nil when no rotation is under way
}

// CARotation is a rotation of the site CA under way.
type CARotation struct {
	// Phase is CAStart (Cert is the new CA: trusted, not yet issuing) or CAIssue (Cert is the
	// old CA: trusted, no longer issuing).
	Phase string    `json:"phase"`
	Cert  []byte    `json:"cert"` // PEM
	Key   []byte    `json:"key"`  // PEM
	Since time.Time `json:"since"`
}

// Next returns the state after step at now, which comes wait at least after the step before
// (CAStepWait; tests wait less); site names a new CA.
func (s CAState) Next(step, site string, now time.Time, wait time.Duration) (CAState, error) {
	if s.Rotation != nil && now.Sub(s.Rotation.Since) < wait {
		return s, fmt.Errorf("%w: the last step was taken at %s; the next may follow from %s, once every front door and agent has followed it",
			ErrCARotation, s.Rotation.Since.UTC().Format(time.RFC3339), s.Rotation.Since.Add(wait).UTC().Format(time.RFC3339))
	}
	phase := ""
	if s.Rotation != nil {
		phase = s.Rotation.Phase
	}
	switch {
	case step == CAStart && phase == "":
		cert, key, err := GenerateCA(site)
		if err != nil {
			return s, err
		}
		return CAState{Cert: s.Cert, Key: s.Key, Rotation: &CARotation{Phase: CAStart, Cert: cert, Key: key, Since: now.UTC()}}, nil
	case step == CAIssue && phase == CAStart:
		return CAState{Cert: s.Rotation.Cert, Key: s.Rotation.Key, Rotation: &CARotation{Phase: CAIssue, Cert: s.Cert, Key: s.Key, Since: now.UTC()}}, nil
	case step == CARetire && phase == CAIssue:
		return CAState{Cert: s.Cert, Key: s.Key}, nil
	case step != CAStart && step != CAIssue && step != CARetire:
		return s, fmt.Errorf("%w: no step %q (start, issue or retire)", ErrCARotation, step)
	case phase == "":
		return s, fmt.Errorf("%w: no rotation is under way (start one first)", ErrCARotation)
	default:
		return s, fmt.Errorf("%w: the rotation under way is at step %s: the next is %s", ErrCARotation, phase, map[string]string{CAStart: CAIssue, CAIssue: CARetire}[phase])
	}
}

// Apply makes ca issue and trust as s says.
func (ca *CA) Apply(s CAState) error {
	var also []byte
	if s.Rotation != nil {
		also = s.Rotation.Cert
	}
	return ca.Set(s.Cert, s.Key, also)
}

// CAStatus is the answer of GET /v1/admin/ca and POST /v1/admin/rotate-ca: the site CA.
type CAStatus struct {
	// Issuing is the CA that issues; Trusted every CA certificate trusted (two while the CA
	// is rotated), the issuing one first.
	Issuing CAInfo   `json:"issuing"`
	Trusted []CAInfo `json:"trusted"`
	// Phase is the step a rotation under way has reached ("start" or "issue"), "" when none is.
	Phase string    `json:"phase,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Next says what the operator does next.
	Next string `json:"next"`
}

// CAInfo describes a CA certificate.
type CAInfo struct {
	Subject  string    `json:"subject"`
	SHA256   string    `json:"sha256"` // of the certificate
	NotAfter time.Time `json:"not_after"`
}

// Status describes s for an operator; a step may follow wait after the one before.
func (s CAState) Status(wait time.Duration) (CAStatus, error) {
	var out CAStatus
	all := s.Cert
	if s.Rotation != nil {
		all = append(append([]byte(nil), s.Cert...), s.Rotation.Cert...)
		out.Phase, out.Since = s.Rotation.Phase, s.Rotation.Since
	}
	for rest := all; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return out, err
		}
		sum := sha256.Sum256(c.Raw)
		out.Trusted = append(out.Trusted, CAInfo{Subject: c.Subject.String(), SHA256: hex.EncodeToString(sum[:]), NotAfter: c.NotAfter})
	}
	if len(out.Trusted) == 0 {
		return out, errors.New("no CA certificate")
	}
	out.Issuing = out.Trusted[0]
	from := out.Since.Add(wait).UTC().Format(time.RFC3339)
	switch out.Phase {
	case "":
		out.Next = "no rotation is under way; frontdoor admin rotate-ca starts one"
	case CAStart:
		out.Next = "every front door and agent trusts the new CA beside the old one, which still issues. Give clients and browsers the new ca.pem " +
			"(the two CAs; in every front door's data dir), and agents that were off their --ca too; then, from " + from +
			", frontdoor admin rotate-ca --issue makes the new CA issue"
	case CAIssue:
		out.Next = "the new CA issues: the listeners' and gateways' certificates are new, and agents renew theirs within seconds. From " + from +
			", once every client has the new ca.pem, frontdoor admin rotate-ca --retire stops trusting the old CA"
	}
	return out, nil
}
