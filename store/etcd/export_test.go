package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// Client is the store's client of etcd, for tests that read or change what etcd holds
// behind the store's back.
func Client(st *Store) *clientv3.Client { return st.cli }

// FlushCache writes the store's local host cache file now, as its loop does every
// cacheFlush.
func FlushCache(st *Store) error { return st.flushCache() }
