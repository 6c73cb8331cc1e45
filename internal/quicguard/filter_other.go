//go:build !linux

package quicguard

import (
	"errors"
	"syscall"
)

var errNoFilter = errors.New("quicguard: socket filters are Linux's")

func attach(syscall.RawConn, float64) error { return errNoFilter }

func detach(syscall.RawConn) error { return nil }
