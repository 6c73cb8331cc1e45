package client

import "errors"

// The errors of package client; returned errors wrap them, so test with errors.Is.
var (
	// ErrNoAddress is returned by Resolve when the name has no A or AAAA record.
	ErrNoAddress = errors.New("no address")
	// ErrUnauthorized means the launch API refused the credentials (HTTP 401).
	ErrUnauthorized = errors.New("authentication failed")
	// ErrDenied means the broker denied the launch (HTTP 403); see DeniedError for the reason.
	ErrDenied = errors.New("launch denied")
	// ErrTicketDenied is returned when a gateway or machine refuses a channel's ticket.
	ErrTicketDenied = errors.New("ticket denied")
	// ErrLoginExpired is returned when a gateway or machine refuses a channel's ticket
	// because its login is past the site's factor lifetime (ticket.StatusLoginExpired):
	// no other gateway takes it, and a new launch needs a new login.
	ErrLoginExpired = errors.New("the login's factor lifetime is over")
	// ErrLoginRequired is wrapped by Err when the session ended because only a new login
	// (typed by the user: a password, a new one-time code) brings it back: a gateway said
	// ErrLoginExpired, or a new launch with the credentials held was refused
	// (ErrUnauthorized). The session does not retry.
	ErrLoginRequired = errors.New("log in again")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("session closed")
	// ErrDown is returned while the session is cut and reconnecting.
	ErrDown = errors.New("session is reconnecting")
	// ErrLost is wrapped by Err when the session gave up reconnecting.
	ErrLost = errors.New("session lost")
	// ErrNoChannel is returned for a port the session did not open.
	ErrNoChannel = errors.New("no such channel")
	// ErrDesktop is returned when the machine's desktop server does not take the session's
	// connection (the agent says why).
	ErrDesktop = errors.New("the desktop server is unavailable")
	// ErrNotTheMachine is returned when a direct-mode machine's certificate does not name
	// the descriptor's machine.
	ErrNotTheMachine = errors.New("the certificate does not name the session's machine")
	// ErrNoQUIC is returned by MigrateQUIC when the session does not use QUIC.
	ErrNoQUIC = errors.New("session does not use QUIC")
)
