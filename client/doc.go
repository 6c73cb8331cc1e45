// Package client is the client side of frontdoor: it resolves a front door through the GSLB DNS
// server, launches a resource over the HTTPS launch API, and opens the session's display
// channels — through a secure gateway or directly to the machine, TLS streams and QUIC
// datagram flows either way, each opened with a ticket — and keeps them up.
//
// A Session watches its channels: a TCP channel that fails, or a UDP keepalive echo missing for
// about a second, is a cut. The session then moves all its channels together: first with its
// reconnect ticket through the descriptor's gateways in order (short dial timeouts), and when
// none answers, with a new launch through another front door (Options.Relaunch, e.g.
// Launcher.Relaunch, which re-resolves the DNS name). Every cut, failed attempt and return is
// an Event, passed to Options.OnEvent and kept in the session's timeline, which drills read.
// A session whose login is past the site's factor lifetime (a gateway answers
// ticket.StatusLoginExpired), or whose new launch is refused the credentials it holds, ends
// with ErrLoginRequired instead: only a login the user makes again brings it back.
//
// TCP channels are carried for one user at a time: Attach hands out the channel's stream (a
// local pipe), Expose serves it on a local TCP port. A cut closes the attached connection —
// bytes in flight are lost, so a stream protocol must reconnect — and the next connection rides
// the new channel.
//
// UDP channels through a gateway ride one QUIC connection to its quic_port as DATAGRAM frames
// (plain UDP only to a gateway whose descriptor offers no QUIC port, which takes it only when
// the site turns plain_udp on). Options.QUIC carries the TCP channels on that connection too,
// as streams, so that the whole session survives a change of the client's address
// (MigrateQUIC). In direct mode each UDP channel is a QUIC connection to the machine's port,
// whose certificate must name the machine.
package client
