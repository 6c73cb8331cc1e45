package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// DeniedError is the broker's refusal of a launch, with its reason and trace.
type DeniedError struct {
	Reason string
	Trace  []string
}

// Error implements error.
func (e *DeniedError) Error() string {
	if e.Reason == "" {
		return ErrDenied.Error()
	}
	return ErrDenied.Error() + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Launch asks the launch API at launchURL (e.g. "https://192.0.2.10:9443"; "/v1/launch" is
// added when the URL has no path) for resource as user, over HTTPS with HTTP Basic
// authentication, and returns the connection descriptor. rootCAs verifies the server (nil: the
// system pool). endpoint names the client device ("" for none).
func Launch(ctx context.Context, launchURL, user, password, resource, endpoint string, rootCAs *x509.CertPool) (*Descriptor, error) {
	return launch(ctx, launchURL, credentials{user: user, password: password}, resource, endpoint, rootCAs)
}

// OTPHeader carries the one-time code of a login beside its password (the launch API's
// logins.OTPHeader).
const OTPHeader = "X-Frontdoor-OTP"

// credentials are what a launch logs in with: HTTP Basic with a one-time code (otp; "" for
// none) beside the password, or an ID token (token) as a bearer credential, or a client
// certificate (cert; nil for none), with the code beside it and without HTTP Basic when
// the password is "".
type credentials struct {
	user, password, otp, token string
	cert                       *tls.Certificate
	launchFile                 string // a launch file's ticket (ticket.LaunchFileScheme)
}

// set puts the credentials on req (all but the certificate, which tlsConfig presents).
func (c credentials) set(req *http.Request) {
	if c.launchFile != "" {
		req.Header.Set("Authorization", ticket.LaunchFileScheme+" "+c.launchFile)
		return
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		return
	}
	if c.password != "" || c.cert == nil {
		req.SetBasicAuth(c.user, c.password)
	}
	if c.otp != "" {
		req.Header.Set(OTPHeader, c.otp)
	}
}

// tlsConfig is the client TLS config of a launch: rootCAs verify the server, and the
// certificate, if any, is presented.
func (c credentials) tlsConfig(rootCAs *x509.CertPool) *tls.Config {
	tc := &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
	if cert := c.cert; cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return tc
}

// launch is Launch with any credentials.
func launch(ctx context.Context, launchURL string, cred credentials, resource, endpoint string, rootCAs *x509.CertPool) (*Descriptor, error) {
	u := launchURL
	if i := strings.Index(u, "://"); i >= 0 && !strings.Contains(u[i+3:], "/") {
		u += "/v1/launch"
	}
	body, err := json.Marshal(map[string]string{"resource": resource, "endpoint": endpoint})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("launch at %s: %w", launchURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	cred.set(req)
	tr := &http.Transport{
		TLSClientConfig:     cred.tlsConfig(rootCAs),
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		TLSHandshakeTimeout: 3 * time.Second,
		DisableKeepAlives:   true,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("launch at %s: %w", launchURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("launch at %s: reading answer: %w", launchURL, err)
	}
	var answer struct {
		Error  string   `json:"error"`
		Reason string   `json:"reason"`
		Trace  []string `json:"trace"`
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		who := cred.user
		switch {
		case cred.launchFile != "":
			who = "the launch file's login"
		case cred.token != "":
			who = "the single sign-on login"
		case who == "" && cred.cert != nil && cred.cert.Leaf != nil:
			who = "the certificate of " + cred.cert.Leaf.Subject.String()
		}
		var a struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &a)
		if a.Error != "" && a.Error != "authentication required" {
			return nil, fmt.Errorf("launch at %s as %q: %w: %s", launchURL, who, ErrUnauthorized, a.Error)
		}
		return nil, fmt.Errorf("launch at %s as %q: %w", launchURL, who, ErrUnauthorized)
	case http.StatusForbidden:
		_ = json.Unmarshal(b, &answer)
		return nil, fmt.Errorf("launch of %q at %s: %w", resource, launchURL, &DeniedError{Reason: answer.Reason, Trace: answer.Trace})
	default:
		_ = json.Unmarshal(b, &answer)
		msg := answer.Error
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("launch at %s: %s: %s", launchURL, resp.Status, msg)
	}
	var d Descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("launch at %s: bad descriptor: %w", launchURL, err)
	}
	if d.SessionID == "" {
		return nil, fmt.Errorf("launch at %s: descriptor has no session_id", launchURL)
	}
	return &d, nil
}

// LaunchFile launches the resource of a launch file (ticket.ReadLaunchFile) at the launch APIs
// it names, in turn while one cannot be reached, and returns the descriptor and the launch
// API that answered. The file opens once: a launch API that answered refuses it ever after.
func LaunchFile(ctx context.Context, doc ticket.LaunchFileDoc, endpoint string, rootCAs *x509.CertPool) (*Descriptor, string, error) {
	var errs []error
	for _, u := range doc.LaunchURLs {
		d, err := launch(ctx, u, credentials{launchFile: doc.Ticket}, doc.Resource, endpoint, rootCAs)
		if err == nil {
			return d, u, nil
		}
		errs = append(errs, err)
		var ue *url.Error
		if !errors.As(err, &ue) {
			break // answered: the file is used up, or refused
		}
	}
	return nil, "", fmt.Errorf("opening the launch file of %s: %w", doc.Resource, errors.Join(errs...))
}

// Launcher launches a resource through the front doors that a DNS name resolves to: it
// resolves the name, then tries each address in turn, the one that answered last time after
// the others (so that a new launch after a cut goes through another front door).
type Launcher struct {
	// Name is the front door DNS name (or an IP address).
	Name string
	// DNSServer is the DNS server to ask ("host:port"); "" uses the system resolver.
	DNSServer string
	// Port is the launch API port. Default: 9443.
	Port uint16
	// User and Password authenticate with HTTP Basic.
	User, Password string
	// Certificate is a client certificate (and its key) presented to the front doors: one
	// of the site CA or of an operator CA (a smart card's, exported) logs in without a
	// password; the front door takes the user from it (and the certificate before a
	// password given too). Password "" sends no HTTP Basic credentials then. Default: nil
	// (none).
	Certificate *tls.Certificate
	// Token is an ID token of the site's identity provider (OIDCLogin), sent as a bearer
	// credential instead of User and Password. When it expires (an hour, at most
	// providers), a new launch is refused it, and the session ends with ErrLoginRequired.
	Token string
	// OTP is the login's one-time code (a TOTP code, or a RADIUS passcode where the site
	// asks RADIUS for a second factor), sent beside the password in OTPHeader; "" for none.
	// A code is good for one login: the launch API takes it again only while it
	// remembers that login (five minutes), so a new launch after a cut later than that is
	// refused, and the session ends with ErrLoginRequired for the user to log in again.
	OTP string
	// Resource is the application or desktop to launch; Endpoint names the device.
	Resource, Endpoint string
	// RootCAs verifies the front doors (nil: the system pool).
	RootCAs *x509.CertPool

	mu   sync.Mutex // guards last
	last netip.Addr // the front door that answered last
}

// Launch resolves the name and launches through the first front door that answers, returning
// the descriptor and that front door's address. It fails fast on ErrUnauthorized and
// ErrDenied, which another front door would repeat.
func (l *Launcher) Launch(ctx context.Context) (*Descriptor, netip.Addr, error) {
	addrs, err := Resolve(ctx, l.Name, l.DNSServer)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	order := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a != last {
			order = append(order, a)
		}
	}
	if len(order) < len(addrs) {
		order = append(order, last)
	}
	port := l.Port
	if port == 0 {
		port = 9443
	}
	var errs []error
	for _, a := range order {
		u := "https://" + net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
		d, err := launch(ctx, u, credentials{user: l.User, password: l.Password, otp: l.OTP, token: l.Token, cert: l.Certificate}, l.Resource, l.Endpoint, l.RootCAs)
		if err == nil {
			l.mu.Lock()
			l.last = a
			l.mu.Unlock()
			return d, a, nil
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrDenied) || ctx.Err() != nil {
			return nil, netip.Addr{}, err
		}
		errs = append(errs, err)
	}
	return nil, netip.Addr{}, fmt.Errorf("no front door of %s answered: %w", l.Name, errors.Join(errs...))
}

// Relaunch is Launch shaped for Options.Relaunch.
func (l *Launcher) Relaunch(ctx context.Context) (*Descriptor, string, error) {
	d, a, err := l.Launch(ctx)
	if err != nil {
		return nil, "", err
	}
	return d, a.String(), nil
}
