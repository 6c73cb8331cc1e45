package proxy

import "errors"

// Errors returned by the proxy. Callers compare with errors.Is.
var (
	// ErrNoBackend means no backend of the pool is eligible (all down, or the pool is empty).
	ErrNoBackend = errors.New("no eligible backend")
	// ErrClientHello means the first bytes on a TLS listener were not a usable ClientHello.
	ErrClientHello = errors.New("malformed tls client hello")
	// ErrClientHelloTooLarge means the ClientHello exceeded Listener.MaxClientHello.
	ErrClientHelloTooLarge = errors.New("tls client hello too large")
	// ErrClosed means the server was closed.
	ErrClosed = errors.New("proxy closed")
	// ErrDraining means the server is draining (Shutdown): it takes no new configuration.
	ErrDraining = errors.New("proxy draining")
)
