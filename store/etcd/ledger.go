package etcd

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Ledger is the site-wide ticket ledger (the node adapts it to ticket.Ledger): a launch
// ticket's channel is admitted once whichever gateway of the site sees it, and a revocation
// reaches every node through the watch.
type Ledger struct{ st *Store }

// Ledger returns the store's ticket ledger.
func (st *Store) Ledger() Ledger { return Ledger{st} }

// ledgerTimeout bounds one ledger transaction: a gateway waits no longer to admit a channel.
const ledgerTimeout = 3 * time.Second

// Use records that ticket id opened channel ch ("8443/tcp") and reports false if it already
// had: one transaction that creates the channel's key only if it never existed, on a lease
// that ends after until.
func (l Ledger) Use(id [16]byte, ch string, until time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	lease, err := l.st.leaseUntil(ctx, until)
	if err != nil {
		return false, err
	}
	k := l.st.key("tickets", "used", hex.EncodeToString(id[:]), ch)
	start := time.Now()
	r, err := l.st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, "", leaseOpt(lease)...)).
		Commit()
	if err != nil {
		l.st.met.observe("ticket", "error", start)
		return false, fmt.Errorf("recording ticket use: %w", err)
	}
	l.st.met.observe("ticket", map[bool]string{true: "ok", false: "replay"}[r.Succeeded], start)
	return r.Succeeded, nil
}

// Revoke makes every ticket of session invalid until until: the revocation key lives until until; this node's view has
// it at once, the others' within a watch round trip.
func (l Ledger) Revoke(session string, until time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	lease, err := l.st.leaseUntil(ctx, until)
	if err != nil {
		return err
	}
	if _, err := l.st.cli.Put(ctx, l.st.key("tickets", "revoked", session), "", leaseOpt(lease)...); err != nil {
		return fmt.Errorf("revoking session %s: %w", session, err)
	}
	l.st.mu.Lock()
	l.st.revoked[session] = true
	l.st.mu.Unlock()
	return nil
}

// Revoked reports whether session was revoked, from the view.
func (l Ledger) Revoked(session string) (bool, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.revoked[session], nil
}
