//go:build !linux

package proxy

// rawTCP is the raw engine's state in the Server; the raw engine is Linux-only, so here it
// is empty.
type rawTCP struct{}

// defaultEngine is the standard engine on systems other than Linux.
func defaultEngine(s *Server) (tcpEngine, error) { return newStdEngine(s) }
