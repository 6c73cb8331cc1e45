package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/spf13/cobra"
)

// connectOpts are the flags of frontdoor connect.
type connectOpts struct {
	name, resource, endpoint string
	dns, ca, local, file     string
	launchPort, quicPort     uint16
	tcp, udp                 []uint
	duration, echo           time.Duration
	verbose, open, websocket bool
	loginFlags
}

// loginFlags are how connect logs in: a password (and a one-time code), a client
// certificate, or single sign-on.
type loginFlags struct {
	user, password, otp, cert, key string
	sso                            bool
}

func newConnectCmd() *cobra.Command {
	var o connectOpts
	c := &cobra.Command{
		Use:   "connect (NAME (--user U | --cert FILE | --sso) --resource R | --file LAUNCH-FILE)",
		Short: "Launch a resource through a front door and keep its display channels up",
		Long: `connect resolves NAME through the site's DNS (--dns, e.g. the GSLB server), launches the
resource at https://ADDRESS:LAUNCH-PORT/v1/launch, prints the descriptor and the broker's trace,
and opens the session's channels: through a secure gateway (TLS and UDP, each opened with the
launch ticket) or directly to the machine. It proves each channel with a little echo traffic and
reconnects by itself when a channel breaks — the reconnect ticket through the next gateway
first, then a new launch through another front door — printing when it was cut and when it was
back. The descriptor names the desktop's protocol (vnc, rdp, or the agent's builtin desktop,
which speaks VNC) and its TCP channel; connect reads the desktop once as a viewer would to
prove it. With --local, a local TCP port leads to the desktop: every connection a viewer
makes there is a stream of its own to the desktop server, which outlives a gateway's loss
(the viewer stays connected while the session moves to another gateway). --open starts a
viewer found on PATH on it, or prints what to run. It runs until Ctrl-C or --duration.

The password comes from --password or the FRONTDOOR_PASSWORD environment variable. Instead
of a password, --cert (and --key) logs in with a client certificate: one of the site CA
(frontdoor admin client-cert) or of a CA the site names in site.auth.client_certificates,
such as a smart card's certificate exported with its key; the front door takes the user
from the certificate, and --user may be left out. A user
enrolled for one-time codes (frontdoor totp enroll) gives the current one with --otp, when
the site's access rules require it; where the site asks a RADIUS server for a second factor
(site.auth.radius, role factor), --otp carries its passcode (an RSA SecurID tokencode, a Duo
or authenticator passcode) the same way, and where RADIUS checks the password itself (role
primary), --password is the one the RADIUS server knows. When a gateway says the login is older than the site's
factor lifetime (or a new launch is refused the credentials given, such as a code used up),
connect stops and says to log in again: run it again, with a new code.

With --sso, connect signs in through the site's identity provider instead (site.auth.oidc):
it prints the provider's login page to open in a browser, takes the provider's answer on a
listener of its own on 127.0.0.1, and launches with the ID token; no --user or password. The
token lasts what the provider gives it (often an hour): a new launch after that is refused it,
and connect says to log in again.

With --file, connect opens a launch file that the user's portal gave (a download, as a
Citrix .ica file): it launches the file's resource at the launch API the file names, as the
user who signed in at the portal, without a password; no NAME, --user or --resource. A launch
file opens once, within a minute of being made; a session that must launch again after that
(every gateway lost for longer than its reconnect ticket allows) is launched again at the
portal.`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.file != "" && (len(args) > 0 || o.resource != ""):
				return errors.New("--file names the front door and the resource: give no NAME or --resource with it")
			case o.file == "" && (len(args) == 0 || o.resource == ""):
				return errors.New("connect needs a NAME and --resource, or a --file")
			}
			if len(args) > 0 {
				o.name = args[0]
			}
			if o.password == "" && o.cert == "" {
				o.password = os.Getenv("FRONTDOOR_PASSWORD")
			}
			return runConnect(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.user, "user", "", "user name (required without --cert or --sso)")
	f.StringVar(&o.password, "password", "", "password (default: $FRONTDOOR_PASSWORD, unless --cert)")
	f.StringVar(&o.cert, "cert", "", "PEM file of a client certificate (and its chain) that logs in instead of a password")
	f.StringVar(&o.key, "key", "", "PEM file of the --cert certificate's private key (default: the --cert file)")
	f.StringVar(&o.otp, "otp", "", "one-time code sent beside the password: a TOTP code (frontdoor totp enroll) or the site's RADIUS passcode")
	f.StringVar(&o.resource, "resource", "", "application or desktop to launch (required)")
	f.StringVar(&o.endpoint, "endpoint", "", "name of this client device, for session reconnection rules")
	f.StringVar(&o.dns, "dns", "", "DNS server that resolves NAME, host:port (default: the system resolver)")
	f.Uint16Var(&o.launchPort, "launch-port", 9443, "port of the launch API")
	f.StringVar(&o.ca, "ca", "", "PEM file of the CA that signs the front doors' and gateways' certificates (default: system roots)")
	f.UintSliceVar(&o.tcp, "tcp", []uint{8443}, "TCP channels to open")
	f.UintSliceVar(&o.udp, "udp", []uint{4172}, "UDP channels to open")
	f.StringVar(&o.local, "local", "", "expose the desktop on this local address, e.g. 127.0.0.1:5900: every connection a viewer makes is a desktop stream of its own")
	f.BoolVar(&o.open, "open", false, "start a viewer found on PATH for the desktop's protocol (vncviewer, xfreerdp; mstsc on Windows) on the local tunnel (--local, else a free port of 127.0.0.1)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	f.DurationVar(&o.echo, "echo", time.Second, "period of the echo traffic that proves the channels; 0 for none")
	f.Uint16Var(&o.quicPort, "quic", 0, "carry every channel to gateways, TCP ones too, over QUIC on this UDP port (a gateway's quic_port); 0: TCP channels over TLS, UDP channels over QUIC at the quic_port the launch names")
	f.BoolVar(&o.verbose, "verbose", false, "print every failed reconnect attempt and every echo")
	f.BoolVar(&o.sso, "sso", false, "sign in through the site's identity provider in a browser (single sign-on) instead of a user and password")
	f.BoolVar(&o.websocket, "websocket", false, "carry the TCP channels to gateways over WebSockets on their HTTPS port (443 on a site), where a firewall passes HTTPS alone")
	f.StringVar(&o.file, "file", "", "open a launch file from the portal (a .fdlaunch download) instead of signing in")
	return c
}

// runConnect launches, opens the channels and reports until ctx ends or the duration passes.
func runConnect(ctx context.Context, w, errw io.Writer, o connectOpts) error {
	var cert *tls.Certificate
	switch {
	case o.file != "" && (o.sso || o.user != "" || o.password != "" || o.cert != "" || o.otp != ""):
		return errors.New("a launch file signs in as the portal's login: give no --user, --password, --otp, --cert or --sso with --file")
	case o.file != "":
	case o.sso && (o.user != "" || o.otp != ""):
		return errors.New("--sso signs in through the identity provider: give no --user or --otp with it")
	case o.sso && o.cert != "":
		return errors.New("--sso signs in through the identity provider: give no --cert with it")
	case o.key != "" && o.cert == "":
		return errors.New("--key goes with --cert")
	case o.cert != "":
		c, err := loadClientCert(o.cert, o.key)
		if err != nil {
			return err
		}
		cert = c
	case !o.sso && o.user == "":
		return errors.New("no user: give --user, or --sso to sign in through the site's identity provider, or a client certificate with --cert")
	case !o.sso && o.password == "":
		return errors.New("no password: give --password or set FRONTDOOR_PASSWORD, or log in with a client certificate (--cert)")
	}
	chans, err := connectChannels(o.tcp, o.udp)
	if err != nil {
		return err
	}
	var pool *x509.CertPool
	if o.ca != "" {
		b, err := os.ReadFile(o.ca)
		if err != nil {
			return fmt.Errorf("reading CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("CA file %s holds no PEM certificate", o.ca)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	out := &syncWriter{w: w}
	l := &client.Launcher{Name: o.name, DNSServer: o.dns, Port: o.launchPort, User: o.user, Password: o.password, OTP: o.otp,
		Certificate: cert, Resource: o.resource, Endpoint: o.endpoint, RootCAs: pool}
	if o.sso {
		tok, err := signIn(ctx, errw, o, pool)
		if err != nil {
			return err
		}
		l.User, l.Password, l.Token = "", "", tok
	}
	var d *client.Descriptor
	var frontDoor fmt.Stringer
	if o.file != "" {
		d, frontDoor, err = openLaunchFile(ctx, o, pool)
	} else {
		var fd netip.Addr
		d, fd, err = l.Launch(ctx)
		frontDoor = fd
	}
	if err != nil {
		var de *client.DeniedError
		if errors.As(err, &de) && len(de.Trace) > 0 {
			out.printf("trace:\n  %s\n", strings.Join(de.Trace, "\n  "))
		}
		return err
	}
	out.printf("%s", describeLaunch(d, frontDoor.String()))
	echoed := newEchoMarks()
	relaunch := func(ctx context.Context) (*client.Descriptor, string, error) {
		d, fd, err := l.Relaunch(ctx)
		if err == nil {
			out.printf("%s", describeLaunch(d, fd))
		}
		return d, fd, err
	}
	if o.file != "" {
		relaunch = nil // a launch file opens once
	}
	if dk := d.Desktop; (o.local != "" || o.open) && dk != nil && dk.UDPChannel != nil && !slices.Contains(chans, *dk.UDPChannel) {
		chans = append(chans, *dk.UDPChannel) // the desktop's UDP transport, which the viewer gets beside its TCP
	}
	var quic *client.QUICOptions
	if o.quicPort != 0 {
		quic = &client.QUICOptions{Port: o.quicPort}
	}
	sess, err := client.Open(ctx, client.Options{
		Descriptor: d, RootCAs: pool, Channels: chans, Relaunch: relaunch, QUIC: quic, WebSocket: o.websocket,
		Logger: slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e client.Event) {
			switch e.Kind {
			case client.EventAttempt:
				if !o.verbose {
					return
				}
			case client.EventBack:
				echoed.reset()
			}
			out.printf("%s\n", e)
		},
	})
	if errors.Is(err, client.ErrLoginExpired) {
		out.printf("%s\n", loginAgain(err))
		return fmt.Errorf("%w: %w", client.ErrLoginRequired, err)
	}
	if err != nil {
		return err
	}
	defer sess.Close()
	if o.local != "" || o.open {
		if err := exposeDesktop(ctx, sess, o, errw, out); err != nil {
			return err
		}
	}
	var tick <-chan time.Time
	if o.echo > 0 {
		t := time.NewTicker(o.echo)
		defer t.Stop()
		tick = t.C
		connectEcho(ctx, sess, chans, echoed, out, o.verbose)
	}
	for {
		select {
		case <-ctx.Done():
			sess.Close()
			out.printf("%s\n", connectSummary(sess.Timeline()))
			return nil
		case <-sess.Done():
			out.printf("%s\n", connectSummary(sess.Timeline()))
			if err := sess.Err(); errors.Is(err, client.ErrLoginRequired) {
				out.printf("%s\n", loginAgain(err))
				return err
			}
			return sess.Err()
		case <-tick:
			connectEcho(ctx, sess, chans, echoed, out, o.verbose)
		}
	}
}

// openLaunchFile launches the resource of the launch file o.file.
func openLaunchFile(ctx context.Context, o connectOpts, pool *x509.CertPool) (*client.Descriptor, fmt.Stringer, error) {
	f, err := os.Open(o.file)
	if err != nil {
		return nil, nil, err
	}
	doc, err := ticket.ReadLaunchFile(f)
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.file, err)
	}
	if time.Now().After(doc.Expires) {
		return nil, nil, fmt.Errorf("the launch file of %s expired at %s: open it again at the portal", doc.Resource, doc.Expires.Local().Format(time.TimeOnly))
	}
	d, u, err := client.LaunchFile(ctx, doc, o.endpoint, pool)
	if err != nil {
		return nil, nil, err
	}
	return d, stringer(u), nil
}

// stringer is a string as a fmt.Stringer.
type stringer string

func (s stringer) String() string { return string(s) }

// exposeDesktop serves the desktop on --local (or a free loopback port for --open) and,
// with --open, starts a viewer on it.
func exposeDesktop(ctx context.Context, sess *client.Session, o connectOpts, errw io.Writer, out *syncWriter) error {
	dk := sess.Desktop()
	local := o.local
	if local == "" {
		local = "127.0.0.1:0"
	}
	addr, err := sess.Expose(local, dk.Channel.Port)
	if err != nil {
		return err
	}
	out.printf("local %s leads to the %s desktop on %s (each connection a stream of its own)\n", addr, dk.Protocol, dk.Channel)
	if u := dk.UDPChannel; u != nil {
		if _, err := sess.ExposeUDP(addr.String(), u.Port); err != nil {
			out.printf("the desktop's UDP transport stays off: %v\n", err)
		} else {
			out.printf("local %s/udp leads to its UDP transport on %s (one flow)\n", addr, u)
		}
	}
	if !o.open {
		return nil
	}
	cmd, err := client.ViewerCommand(dk, addr.String(), os.TempDir())
	if err != nil {
		out.printf("no viewer started: %v\n  point a %s viewer at %s\n", err, strings.ToUpper(dk.Speaks()), addr)
		return nil
	}
	cmd.Stdout, cmd.Stderr = errw, errw
	if err := cmd.Start(); err != nil {
		out.printf("starting %s: %v\n  point a %s viewer at %s\n", cmd.Path, err, strings.ToUpper(dk.Speaks()), addr)
		return nil
	}
	out.printf("viewer started: %s\n", strings.Join(cmd.Args, " "))
	go cmd.Wait()
	context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	return nil
}

// loadClientCert reads a client certificate and its key (PEM; key "" for the certificate's
// file).
func loadClientCert(certFile, keyFile string) (*tls.Certificate, error) {
	if keyFile == "" {
		keyFile = certFile
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the client certificate %s and its key %s: %w", certFile, keyFile, err)
	}
	return &c, nil
}

// loginAgain tells the user why the session ended for a new login, and what to do.
func loginAgain(err error) string {
	why := "the front door refused the credentials given (a one-time code is good for one login)"
	if errors.Is(err, client.ErrLoginExpired) {
		why = "the login is older than the site's factor lifetime"
	}
	return "log in again: " + why + "; run frontdoor connect again (with a new --otp code if you use one)"
}

func connectChannels(tcp, udp []uint) ([]client.Channel, error) {
	var chans []client.Channel
	for _, p := range tcp {
		if p == 0 || p > 65535 {
			return nil, fmt.Errorf("--tcp %d: not a port", p)
		}
		chans = append(chans, client.Channel{Port: uint16(p), Proto: "tcp"})
	}
	for _, p := range udp {
		if p == 0 || p > 65535 {
			return nil, fmt.Errorf("--udp %d: not a port", p)
		}
		chans = append(chans, client.Channel{Port: uint16(p), Proto: "udp"})
	}
	if len(chans) == 0 {
		return nil, errors.New("no channel to open: give --tcp or --udp")
	}
	return chans, nil
}

// describeLaunch is the descriptor summary that connect prints.
func describeLaunch(d *client.Descriptor, frontDoor string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "launched session %s through front door %s\n", d.SessionID, frontDoor)
	fmt.Fprintf(&b, "  machine %s in zone %s, %s mode", d.Machine, d.Zone, d.Mode)
	if d.Outcome != "" {
		step := fmt.Sprint(d.Step)
		if d.StepLabel != "" {
			step = d.StepLabel
		}
		fmt.Fprintf(&b, ", %s (step %s)", d.Outcome, step)
	}
	b.WriteString("\n")
	pz := d.PreferredZone
	if pz == "" {
		pz = "none"
	}
	fmt.Fprintf(&b, "  preferred zone %s", pz)
	if d.PreferredSource != "" {
		fmt.Fprintf(&b, " (%s)", d.PreferredSource)
	}
	if d.LocationZone != "" {
		fmt.Fprintf(&b, ", location zone %s", d.LocationZone)
	}
	b.WriteString("\n")
	if d.Mode == client.ModeDirect {
		fmt.Fprintf(&b, "  machine address %s\n", d.Address)
	}
	for _, g := range d.Gateways {
		var as []string
		for _, a := range g.Addresses {
			as = append(as, a.String())
		}
		fmt.Fprintf(&b, "  gateway %s (zone %s) %s\n", g.Name, g.Zone, strings.Join(as, ", "))
	}
	var chans []string
	for _, c := range d.Channels {
		chans = append(chans, c.String())
	}
	if len(chans) > 0 {
		fmt.Fprintf(&b, "  channels %s\n", strings.Join(chans, " "))
	}
	if len(d.Trace) > 0 {
		b.WriteString("  trace:\n")
		for _, t := range d.Trace {
			fmt.Fprintf(&b, "    %s\n", t)
		}
	}
	return b.String()
}

// echoMarks remembers which channels printed a successful echo since the last (re)connect.
type echoMarks struct {
	mu   sync.Mutex // guards done
	done map[client.Channel]bool
}

func newEchoMarks() *echoMarks { return &echoMarks{done: map[client.Channel]bool{}} }

func (m *echoMarks) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.done)
}

// first marks c and reports whether it was not marked yet.
func (m *echoMarks) first(c client.Channel) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.done[c]
	m.done[c] = true
	return !was
}

// connectEcho proves the channels and prints the first success after each (re)connect and
// every failure while the session is up: the desktop channel by reading the desktop as a
// viewer does (once per (re)connect), each UDP channel with a little echo traffic.
func connectEcho(ctx context.Context, sess *client.Session, chans []client.Channel, marks *echoMarks, out *syncWriter, verbose bool) {
	if !sess.Up() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, c := range chans {
		var err error
		var what string
		switch c.Proto {
		case "tcp":
			if c != sess.Desktop().Channel || !marks.first(c) {
				continue
			}
			var dc client.DesktopCheck
			if dc, err = sess.CheckDesktop(ctx); err == nil {
				out.printf("desktop on %s ok (%s)\n", c, dc)
				continue
			}
			marks.reset()
		case "udp":
			if d := sess.Descriptor().Desktop; d != nil && d.Protocol != "builtin" {
				continue // only the builtin desktop echoes datagrams; VNC and RDP here have no UDP
			}
			err, what = sess.EchoUDP(ctx, c.Port, 3, 200), "3 datagrams of 200 bytes"
		}
		switch {
		case err == nil:
			if marks.first(c) || verbose {
				out.printf("echo %s ok (%s)\n", c, what)
			}
		case errors.Is(err, client.ErrDown) || ctx.Err() != nil || !sess.Up():
		default:
			out.printf("echo %s failed: %v\n", c, err)
		}
	}
}

// connectSummary sums up a timeline: cuts, returns and the longest gap.
func connectSummary(tl []client.Event) string {
	var cuts, backs, relaunches int
	var longest time.Duration
	session := ""
	for _, e := range tl {
		session = e.Session
		switch e.Kind {
		case client.EventCut:
			cuts++
		case client.EventBack:
			backs++
			longest = max(longest, e.Gap)
			if e.Relaunched {
				relaunches++
			}
		}
	}
	return fmt.Sprintf("session %s: %d cut(s), %d back (%d after a new launch), longest gap %.3fs", session, cuts, backs, relaunches, longest.Seconds())
}

// syncWriter serializes writes from the event callback and the echo loop.
type syncWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (s *syncWriter) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, format, args...)
}

// signIn gets an ID token through the site's identity provider: it asks a front door of
// o.name which provider, and prints the login page for the user to open in a browser.
func signIn(ctx context.Context, errw io.Writer, o connectOpts, pool *x509.CertPool) (string, error) {
	addrs, err := client.Resolve(ctx, o.name, o.dns)
	if err != nil {
		return "", err
	}
	launchURL := "https://" + net.JoinHostPort(addrs[0].String(), strconv.Itoa(int(o.launchPort)))
	return client.SSO{LaunchURL: launchURL, RootCAs: pool, Open: func(url string) error {
		_, err := fmt.Fprintf(errw, "to sign in, open this page in a browser:\n  %s\n", url)
		return err
	}}.Login(ctx)
}
