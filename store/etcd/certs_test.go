package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The site's certificate storage keeps values sealed (an etcd reader sees no key material),
// reads them back at another node, lists and deletes by directory, refuses a node with
// another secret, and its lock lets one node at a time through.
func TestCertsAreSealedSharedAndLocked(t *testing.T) {
	c := cluster(t)
	secret := bytes.Repeat([]byte{7}, etcd.SecretSize)
	a, err := open(t, c, "a").Keys().Certs(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, err := open(t, c, "b").Keys().Certs(secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := []byte("-----BEGIN EC PRIVATE KEY----- the certificate's key")
	for k, v := range map[string][]byte{
		"certificates/ca/desktop.example/desktop.example.key": key,
		"certificates/ca/desktop.example/desktop.example.crt": []byte("crt"),
		"acme/ca/users/ops/ops.json":                          []byte("account"),
	} {
		if err := a.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	got, mod, err := b.Get(ctx, "certificates/ca/desktop.example/desktop.example.key")
	if err != nil || !bytes.Equal(got, key) || time.Since(mod) > time.Minute {
		t.Fatalf("b reads %q (stored %s), %v", got, mod, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	raw, err := cli.Get(ctx, "/frontdoor/test/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range raw.Kvs {
		if bytes.Contains(kv.Value, []byte("PRIVATE KEY")) {
			t.Fatalf("etcd holds %s in clear", kv.Key)
		}
	}
	if l, err := b.List(ctx, "certificates", false); err != nil || !slices.Equal(l, []string{"certificates/ca"}) {
		t.Fatalf("List(certificates) = %q, %v", l, err)
	}
	if l, err := b.List(ctx, "certificates/ca", true); err != nil || len(l) != 2 {
		t.Fatalf("List(certificates/ca, recursive) = %q, %v", l, err)
	}
	if !b.HasBelow(ctx, "certificates/ca") || b.HasBelow(ctx, "certificates/other") {
		t.Fatal("HasBelow tells directories wrong")
	}
	if err := b.Delete(ctx, "certificates"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx, "certificates/ca/desktop.example/desktop.example.crt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after deleting the directory: %v, want fs.ErrNotExist", err)
	}
	other, _ := open(t, c, "c").Keys().Certs(bytes.Repeat([]byte{8}, etcd.SecretSize))
	if _, _, err := other.Get(ctx, "acme/ca/users/ops/ops.json"); !errors.Is(err, etcd.ErrSecret) {
		t.Fatalf("a node with another secret: %v, want ErrSecret", err)
	}

	if err := a.Lock(ctx, "issue_cert_desktop.example"); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := b.Lock(wait, "issue_cert_desktop.example"); err == nil {
		t.Fatal("b took the lock a holds")
	}
	// Two tasks of one node: the second waits too (one etcd session serves them both).
	wait2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if err := a.Lock(wait2, "issue_cert_desktop.example"); err == nil {
		t.Fatal("a second task of a took the lock a holds")
	}
	if err := a.Unlock(ctx, "issue_cert_desktop.example"); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "issue_cert_desktop.example"); err != nil {
		t.Fatalf("b after a unlocked: %v", err)
	}
	b.Unlock(ctx, "issue_cert_desktop.example")
	a.Close()
	b.Close()
	other.Close()
}
