package etcd

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ticketsView is the view's part of the tickets family.
type ticketsView struct {
	revoked     map[string]time.Time // session -> tickets issued before are revoked
	superseded  map[string]uint64    // session -> reconnect tickets of lower marks are refused
	usedTickets map[string]bool      // "<ticket id>/<channel>" of the launch tickets' channels admitted
}

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
//
// In outage mode the channel is recorded in the view, and a launch ticket's channel opens
// only at the node that owns its session's slot (UseFor).
func (l Ledger) Use(id [16]byte, ch string, until time.Time) (bool, error) {
	return l.UseFor(id, "", ch, until)
}

// UseFor is Use for a launch ticket of session ("" for a ticket of no session).
func (l Ledger) UseFor(id [16]byte, session, ch string, until time.Time) (bool, error) {
	return failover(l.st, func() (bool, error) { return l.use(id, ch, until) },
		func() (bool, error) { return l.st.useLocal(id, session, ch, until) })
}

func (l Ledger) use(id [16]byte, ch string, until time.Time) (bool, error) {
	ctx, cancel := l.st.opContextD(context.Background(), ledgerTimeout)
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

// Revoke makes the tickets of session issued before before invalid until until (see
// ticket.Ledger): the revocation key, whose value is before in Unix milliseconds, lives
// until until; a wider revocation already there stays. This node's view has it at once, the
// others' within a watch round trip, and every node's OnRevoked followers are told.
func (l Ledger) Revoke(session string, before, until time.Time) error {
	return l.st.failoverErr(func() error {
		ctx, cancel := l.st.opContextD(context.Background(), ledgerTimeout)
		defer cancel()
		return l.revoke(ctx, session, before, until)
	}, func() error { l.st.revokeLocal(session, before, until); return nil })
}

// revoke writes a revocation to etcd within ctx.
func (l Ledger) revoke(ctx context.Context, session string, before, until time.Time) error {
	lease, err := l.st.leaseUntil(ctx, until)
	if err != nil {
		return err
	}
	k := l.st.key("tickets", "revoked", session)
	v := revokedValue(before)
	// Put unless a wider revocation is stored: values are fixed-width decimals, so etcd's
	// byte comparison is the numeric one (an empty, older-release value revokes all).
	_, err = l.st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, v, leaseOpt(lease)...)).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "<", v), clientv3.Compare(clientv3.Value(k), "!=", "")},
			[]clientv3.Op{clientv3.OpPut(k, v, leaseOpt(lease)...)}, nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("revoking session %s: %w", session, err)
	}
	l.st.mu.Lock()
	if before.After(l.st.revoked[session]) {
		l.st.revoked[session] = before
	}
	l.st.mu.Unlock()
	return nil
}

// Supersede records that a reconnect ticket of session marked mark was used (see
// ticket.Ledger): the key's value is mark, zero-padded, so that a put only if greater is one
// comparison; it lives until until. This node's view has it at once, the others' within a
// watch round trip.
func (l Ledger) Supersede(session string, mark uint64, until time.Time) error {
	return l.st.failoverErr(func() error {
		ctx, cancel := l.st.opContextD(context.Background(), ledgerTimeout)
		defer cancel()
		return l.supersede(ctx, session, mark, until)
	}, func() error { l.st.supersedeLocal(session, mark, until); return nil })
}

// supersede writes a generation's mark to etcd within ctx.
func (l Ledger) supersede(ctx context.Context, session string, mark uint64, until time.Time) error {
	lease, err := l.st.leaseUntil(ctx, until)
	if err != nil {
		return err
	}
	k := l.st.key("tickets", "superseded", session)
	v := fmt.Sprintf("%020d", mark)
	_, err = l.st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, v, leaseOpt(lease)...)).
		Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "<", v)},
			[]clientv3.Op{clientv3.OpPut(k, v, leaseOpt(lease)...)}, nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("superseding the reconnect tickets of session %s: %w", session, err)
	}
	l.st.mu.Lock()
	l.st.superseded[session] = max(l.st.superseded[session], mark)
	l.st.mu.Unlock()
	return nil
}

// Superseded returns the mark below which session's reconnect tickets are refused, from the
// view; 0 when none is.
func (l Ledger) Superseded(session string) (uint64, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.superseded[session], nil
}

// revokedValue writes before as a revocation key's value: Unix milliseconds, zero-padded to
// 20 digits so that values compare as their numbers.
func revokedValue(before time.Time) string { return fmt.Sprintf("%020d", max(before.UnixMilli(), 0)) }

// Revoked returns the issue time before which session's tickets are revoked, from the view;
// zero when none are.
func (l Ledger) Revoked(session string) (time.Time, error) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.revoked[session], nil
}

// OnRevoked registers fn, told of every revocation the watch brings, this node's too: the
// session and the issue time before which its tickets are revoked. fn runs on the watch
// goroutine and must not block for long.
func (h Ledger) OnRevoked(fn func(session string, before time.Time)) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.onRevoked = append(st.onRevoked, fn)
}

// revokedAll is a before later than any ticket's issue time (and one JSON can still write).
var revokedAll = time.Unix(1<<40, 0)

// parseRevoked reads a revocation key's value: before in Unix milliseconds; an empty value
// (written by an older release) revokes every ticket.
func parseRevoked(v []byte) time.Time {
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return revokedAll
	}
	return time.UnixMilli(ms)
}

// applyTicket applies tickets/revoked/<session>, tickets/used/<id>/<channel> and
// tickets/superseded/<session>.
func (st *Store) applyTicket(parts []string, x kv, deleted bool) broker.Change {
	switch {
	case len(parts) == 3 && parts[1] == "revoked":
		if deleted {
			delete(st.revoked, parts[2])
		} else {
			before := parseRevoked(x.value)
			if before.After(st.revoked[parts[2]]) {
				st.revoked[parts[2]] = before
			}
			st.newRevoked = append(st.newRevoked, revocation{parts[2], st.revoked[parts[2]]})
		}
	case len(parts) == 4 && parts[1] == "used":
		if deleted {
			delete(st.usedTickets, parts[2]+"/"+parts[3])
		} else {
			st.usedTickets[parts[2]+"/"+parts[3]] = true
		}
	case len(parts) == 3 && parts[1] == "superseded":
		if deleted {
			delete(st.superseded, parts[2])
		} else if mark, err := strconv.ParseUint(string(x.value), 10, 64); err == nil {
			st.superseded[parts[2]] = max(st.superseded[parts[2]], mark)
		}
	}
	return broker.Change{}
}
