//go:build !(linux && (amd64 || arm64))

package proxy

// rawTCP is the raw engine's state in the Server; the raw engine is 64-bit Linux only, so here it
// is empty.
type rawTCP struct{}

// defaultEngine is the standard engine on systems other than 64-bit Linux.
func defaultEngine(s *Server) (tcpEngine, error) { return newStdEngine(s) }
