// Package client is the client side of frontdoor: it resolves a front door through the GSLB DNS
// server, launches a resource over the HTTPS launch API, and opens the session's display
// channels — through a secure gateway (TLS streams and UDP flows, each opened with a ticket) or
// directly to the machine — and keeps them up.
//
// A Session watches its channels: a TCP channel that fails, or a UDP keepalive echo missing for
// about a second, is a cut. The session then moves all its channels together: first with its
// reconnect ticket through the descriptor's gateways in order (short dial timeouts), and when
// none answers, with a new launch through another front door (Options.Relaunch, e.g.
// Launcher.Relaunch, which re-resolves the DNS name). Every cut, failed attempt and return is
// an Event, passed to Options.OnEvent and kept in the session's timeline, which drills read.
//
// TCP channels are carried for one user at a time: Attach hands out the channel's stream (a
// local pipe), Expose serves it on a local TCP port. A cut closes the attached connection —
// bytes in flight are lost, so a stream protocol must reconnect — and the next connection rides
// the new channel.
//
// Options.QUIC switches the gateway transport to QUIC: one connection per session, TCP channels
// as streams, UDP channels as DATAGRAM frames, surviving a change of the client's address
// (MigrateQUIC). The secure gateway does not serve QUIC yet; QUICGateway is the gateway end of
// that wire format, for tests and for the gateway to adopt.
package client
