package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// Rotating the site CA (pki.CAState's steps: start, issue, retire). The CA's state is the
// site identity's (identities: etcd's on a site of several nodes; on a site of one node the
// data dir's, ca.pem and ca.key until a rotation and caStateFile from the first one on), which
// every node rereads every keyRefresh and applies (refreshKeys). A node keeps ca.pem, for
// clients, as the CA certificates it trusts (two while the CA is rotated), and issues its
// listeners' certificates anew when the CA that issues changes.

// caStateFile holds, in the data dir of a node on a store of one node, the site CA's state
// once it was rotated (pki.CAState, JSON, mode 0600: it holds keys).
const caStateFile = "ca-state.json"

// localCAState reads caStateFile in dataDir; rotated is false when the CA was never rotated
// (ca.pem and ca.key are the CA).
func localCAState(dataDir string) (st pki.CAState, rotated bool, err error) {
	rotated, err = readDataJSON(dataDir, caStateFile, &st)
	return st, rotated, err
}

// caState is the identity's CA.
func (id *identity) caState() pki.CAState {
	return pki.CAState{Cert: id.CACert, Key: id.CAKey, Rotation: id.CARotation}
}

// readCAState returns the site CA's state, the site identity's.
func (r *Node) readCAState(ctx context.Context) (pki.CAState, error) {
	id, err := r.readIdentity(ctx)
	if err != nil {
		return pki.CAState{}, err
	}
	return id.caState(), nil
}

// caStepWait is the least time between two steps of a rotation.
func (r *Node) caStepWait() time.Duration {
	if r.o.CAStepWait > 0 {
		return r.o.CAStepWait
	}
	return pki.CAStepWait
}

// caStatus describes the site CA (GET /v1/admin/ca).
func (r *Node) caStatus(ctx context.Context) (pki.CAStatus, error) {
	st, err := r.readCAState(ctx)
	if err != nil {
		return pki.CAStatus{}, err
	}
	return st.Status(r.caStepWait())
}

// rotateCA takes step of a rotation of the site CA (POST /v1/admin/rotate-ca): a step that
// does not fit the rotation's state wraps api.ErrRefused.
func (r *Node) rotateCA(ctx context.Context, step string) (pki.CAStatus, error) {
	r.rotateMu.Lock()
	defer r.rotateMu.Unlock()
	now := time.Now()
	var next pki.CAState
	take := func(cur pki.CAState) error {
		var err error
		next, err = cur.Next(step, r.cfg.Site.Name, now, r.caStepWait())
		if errors.Is(err, pki.ErrCARotation) {
			err = fmt.Errorf("%w: %w", api.ErrRefused, err)
		}
		return err
	}
	_, err := r.ids.Update(ctx, func(id *identity) error {
		if err := take(id.caState()); err != nil {
			return err
		}
		id.CACert, id.CAKey, id.CARotation = next.Cert, next.Key, next.Rotation
		return nil
	})
	if errors.Is(err, api.ErrRefused) {
		return pki.CAStatus{}, err
	}
	if err != nil {
		return pki.CAStatus{}, fmt.Errorf("%w: the site identity did not take the CA's new state: %v", api.ErrRefused, err)
	}
	if err := r.applyCA(ctx, next); err != nil {
		return pki.CAStatus{}, err
	}
	r.log.Info("site CA rotation: step taken", "step", step)
	return next.Status(r.caStepWait())
}

// applyCA makes the node's CA issue and trust as st says, keeps ca.pem as the certificates it
// trusts, and, when the CA that issues changed, issues the listeners' certificates anew
// (internal issuer; the gateways' certificates follow by themselves).
func (r *Node) applyCA(ctx context.Context, st pki.CAState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	r.caMu.Lock()
	defer r.caMu.Unlock()
	if bytes.Equal(b, r.caApplied) {
		return nil
	}
	issuer := r.ca.Cert()
	if err := r.ca.Apply(st); err != nil {
		return fmt.Errorf("the site CA: %w", err)
	}
	r.caApplied = b
	if err := atomicfile.Write(filepath.Join(r.o.DataDir, "ca.pem"), r.ca.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("writing the CA certificates: %w", err)
	}
	phase := ""
	if st.Rotation != nil {
		phase = st.Rotation.Phase
	}
	r.log.Info("site CA", "issuing", r.ca.Cert().Subject.String(), "rotation", phase)
	if r.ca.Cert().Equal(issuer) || r.certs == nil || r.cfg.Site.TLS.Issuer == "acme" {
		return nil
	}
	if err := r.certs.Reissue(ctx); err != nil {
		return fmt.Errorf("issuing the listeners' certificates from the new CA: %w", err)
	}
	r.log.Info("the listeners' certificates are issued by the new CA")
	return nil
}
