// Package proxy is frontdoor's layer-4 forwarding engine: TCP listeners, TLS listeners that route
// by SNI without terminating TLS (passthrough), and UDP listeners with a flow table, all in front
// of backend pools that follow health verdicts.
//
// A Server is built from a Config (listeners, routes and pools) and Options (the logger, the
// metrics registry, the zone Locator, the Health view and the passive failure reporter that the
// wiring provides). Its lifecycle is New → Listen → Serve(ctx) → Shutdown(ctx) or Close.
// Reload swaps pools and routes without touching established sessions.
//
// Every accepted connection or UDP flow carries the client's user-location zone (from the
// Locator); pools may send it to backends in a PROXY protocol v2 TLV (see package proxyproto).
// Client affinity is shared by all listeners: a client that reached backend X through one
// listener reaches X through the others too, for AffinityTTL, as long as Health says X is up.
//
// On 64-bit Linux the TCP bytes move through the raw engine described next; on other systems
// through the standard engine (engine_std.go): net.TCPListener, net.Dialer and io.Copy between
// *net.TCPConn, a goroutine per direction, without DeferAccept. Both share everything above
// the sockets (limits, PROXY headers, SNI routing, backend choice, accounting).
//
// TCP bulk payload is moved with splice(2) through a pipe of the direction's own: bytes never
// enter user space (TestTCPPayloadIsSplicedNotCopied shows it with the process's I/O counters).
// The raw engine's sockets are those of package internal/rawio: connections are accepted and
// backends connected with raw calls, and the sockets wait for readiness in an edge-triggered
// epoll set of the server's (a rawio.Poll) instead of the runtime's netpoller, which spares the
// calls package net and the netpoller make per socket. A direction starts by copying: it reads
// what is queued into a pooled 16 KiB buffer (held only while bytes move: a read that finds
// nothing gives it back at once) and writes it on, so the short exchanges of a short
// connection cost one read and one write each; a read that fills the buffer switches the
// direction to splicing until it next goes quiet (HAProxy's splice-auto). The connection's own
// goroutine (started by the accept loop) carries the client-to-backend direction; the other
// direction gets a goroutine once the backend has something to say. A direction that stays
// quiet (250ms, or 25ms before its first byte) parks: it gives its goroutine back, and its
// socket's next readiness starts a new one (rawio.Sock.StartOnReadable), so an idle connection
// costs its two sockets and a few hundred bytes of heap, not goroutine stacks.
// Listener options trade generality for speed where the protocol allows: DeferAccept (the
// client speaks first) and NoHalfClose (the backend's FIN ends the connection).
//
// UDP listeners bound to an IP address can be served by two workers that block in the kernel
// (Options.BlockingUDP, package internal/rawio): one reads the clients' datagrams with
// recvmmsg, one relays the backends' replies from an epoll set of the flows' sockets (a
// worker's rawio.Poll); both
// send with sendmmsg and UDP segmentation offload and pause under load to coalesce
// (Listener.UDPCoalesce). Elsewhere a listener is read through the runtime's netpoller with
// ReadBatch and each flow has a goroutine for its replies.
package proxy
