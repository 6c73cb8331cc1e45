package node

// Procs is how a node's work may use the process's Ps (GOMAXPROCS): one value, computed by
// the program that runs the node (`frontdoor serve` reserves them before New), for the node
// never changes GOMAXPROCS itself. The zero value: the node's work takes GOMAXPROCS as its
// CPUs, and UDP sockets are read through the Go poller.
type Procs struct {
	// CPUs is how many CPUs the node's own work may use: GOMAXPROCS as it was before the
	// program added Ps for blocking UDP workers and password comparisons. It sizes the
	// comparisons at once (logins.Throttle.CPUs) and the HTTPS listeners' handshake slots.
	// Default: GOMAXPROCS when New runs.
	CPUs int
	// BlockingUDP reads the UDP of each DNS listener and each udp proxy listener with a
	// worker blocked in the kernel (see gslb.ServerOptions.BlockingUDP and
	// proxy.Options.BlockingUDP); the program adds a P for each (UDPWorkers). Default: false.
	BlockingUDP bool
	// Add, when set, is told how many more Ps (negative: fewer) the blocking UDP workers need
	// after a reload changed their number (BlockingUDP); `frontdoor serve` adds them to
	// GOMAXPROCS, as it does at start. Default: nil.
	Add func(delta int)
}
