// Package store holds the broker.Store backends: memory (store/memory, for tests and
// `frontdoor explain`), bolt (store/bolt, embedded and persistent: go.etcd.io/bbolt, for a
// site of one node) and etcd (store/etcd, the site database shared by every node of a site
// of several), and Open, which picks one from the site configuration. store/etcdembed runs
// an embedded etcd cluster for `frontdoor lab` and the tests.
package store
