//go:build !(linux && (amd64 || arm64))

package gslb

// mmsgWorker is Linux-only; elsewhere the batch workers of golang.org/x/net serve.
func (u *udpLoop) mmsgWorker() func() error { return nil }
