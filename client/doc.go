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
// The desktop rides TCP channels, one per viewer connection: Attach opens one and hands out
// its end (a local pipe), Expose serves viewers on a local TCP port, each connection on a
// channel of its own, so every viewer gets the desktop server's greeting and handshake. Each
// is a resumable stream to the machine's agent (package internal/resume: session
// reliability): a cut does not close the viewer's connection; the session's next link resumes
// the stream from the last byte each end acknowledged, and nothing is lost or doubled. A link
// with no stream proves its route with a probe that also asks whether the desktop server
// answers. Watch runs a viewer loop on the desktop (drills, tests); CheckDesktop reads it once.
//
// UDP channels through a gateway ride one QUIC connection to its quic_port as DATAGRAM frames
// (plain UDP only to a gateway whose descriptor offers no QUIC port, which takes it only when
// the site turns plain_udp on). Options.QUIC carries the TCP channels on that connection too,
// as streams, so that the whole session survives a change of the client's address
// (MigrateQUIC). In direct mode each UDP channel is a QUIC connection to the machine's port,
// whose certificate must name the machine.
package client
