// Package store holds the broker.Store backends: memory (store/memory, for tests, lab and
// `frontdoor explain`) and bolt (store/bolt, embedded and persistent: go.etcd.io/bbolt), and
// Open, which picks one from the site configuration.
package store
