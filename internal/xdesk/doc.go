// Package xdesk starts the real desktop servers — TigerVNC's Xvnc, and xrdp in front of it —
// and runs the real viewers (xfreerdp, vncsnapshot) that the lab (`frontdoor lab --desktop
// xvnc`), the tests and the benchmarks use. It only ever binds loopback or Unix sockets, runs
// each process in its own process group, keeps each server's log in the directory it is
// given, and leaves no process behind: Close, or the end of the context a process was started
// under, stops the whole group, and on Linux a process whose starter died gets SIGTERM.
//
// The binaries come from Debian packages (see ErrNotInstalled); nothing here needs root.
package xdesk

import "errors"

// ErrNotInstalled is returned, wrapped with the missing binary and the package that provides
// it, when a binary a function needs is not on the PATH: "Xvnc is not installed (apt-get
// install tigervnc-standalone-server)".
var ErrNotInstalled = errors.New("is not installed")
