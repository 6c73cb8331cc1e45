//go:build !(linux && (amd64 || arm64))

// Package rawudp is a blocking UDP socket outside the Go poller for one worker, on 64-bit
// Linux only; elsewhere callers use sockets of the net package.
package rawudp
