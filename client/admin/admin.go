// Package admin is the Go client of a front door's admin API (/v1/admin/...): the one the
// CLI's admin commands, the failure drills and the tests use. It signs in with the admin's
// user and password (HTTP basic authentication, on TLS), sends JSON and reads JSON, and turns
// an answer other than 2xx into an error that carries the answer's text.
package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/wire"
)

// MaxAnswer is the most bytes of an answer a Client reads.
const MaxAnswer = 1 << 20

// Client calls one front door's admin API.
type Client struct {
	// URL is the admin listener's base, such as "https://127.1.0.1:9090".
	URL string
	// User and Password sign in (the admin role's).
	User, Password string
	// TLS is the client's TLS config: the site CA among its roots. Default: the system's.
	TLS *tls.Config
	// Timeout bounds each call. Default: 10s.
	Timeout time.Duration

	once sync.Once
	hc   *http.Client
}

// Error is an answer other than 2xx.
type Error struct {
	Method, Path string
	Status       int    // the HTTP status code
	StatusText   string // such as "409 Conflict"
	Body         string // the answer's text, trimmed
}

// Error says the call and its answer.
func (e *Error) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.StatusText)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.StatusText, e.Body)
}

// Call sends method to path with body as JSON (nil: none) and returns the answer's bytes (at
// most MaxAnswer). An answer other than 2xx is an *Error, returned with its bytes.
func (c *Client) Call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.User, c.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if resp.StatusCode/100 != 2 {
		return out, &Error{Method: method, Path: path, Status: resp.StatusCode, StatusText: resp.Status, Body: strings.TrimSpace(string(out))}
	}
	return out, err
}

// Get reads path's JSON answer into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// Post sends body to path and reads the JSON answer into out (nil: not read).
func (c *Client) Post(ctx context.Context, path string, body, out any) error {
	return c.do(ctx, http.MethodPost, path, body, out)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	b, err := c.Call(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer: %w", method, path, err)
	}
	return nil
}

// SecureGateway switches the secure gateway of group ("" for every group) on or off.
func (c *Client) SecureGateway(ctx context.Context, group string, on bool) error {
	return c.Post(ctx, "/v1/admin/gateway", wire.ToggleRequest{On: on, Group: group}, nil)
}

// Override sets an operator's health override of gateway: "up", "down", "drain" or "auto".
func (c *Client) Override(ctx context.Context, gateway, override string) error {
	return c.Post(ctx, "/v1/admin/health", wire.OverrideRequest{Gateway: gateway, Override: override}, nil)
}

func (c *Client) client() *http.Client {
	c.once.Do(func() {
		timeout := c.Timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		c.hc = &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: c.TLS, DisableKeepAlives: true}}
	})
	return c.hc
}
