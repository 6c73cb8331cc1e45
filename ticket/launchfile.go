package ticket

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// A launch file opens a resource in a native viewer, as Citrix's .ica file does: the user's
// portal hands one out (a download) for a resource, and `frontdoor connect --file` launches
// it at the launch API named in it, as the user who signed in at the portal, with that
// login's factors and time. It holds a LaunchFile ticket, no launch or reconnect ticket: the
// launch happens when the file is opened, once, within LaunchFileTTL.

// LaunchFileTTL is how long a launch file may be opened after it was made.
const LaunchFileTTL = 60 * time.Second

// LaunchFileScheme is the HTTP authorization scheme that presents a launch file's ticket to
// the launch API: "Authorization: FrontdoorLaunchFile TICKET".
const LaunchFileScheme = "FrontdoorLaunchFile"

// LaunchFileVersion is the version of the launch file format that LaunchFileDoc writes.
const LaunchFileVersion = 1

// LaunchFileDoc is a launch file (JSON, at most MaxLaunchFile bytes).
type LaunchFileDoc struct {
	// Version is LaunchFileVersion.
	Version int `json:"frontdoor_launch_file"`
	// Site names the site, for the user.
	Site string `json:"site"`
	// LaunchURLs are the launch APIs to open it at, in order (https://HOST:PORT).
	LaunchURLs []string `json:"launch_urls"`
	// Resource and User name what it launches, and for whom.
	Resource string `json:"resource"`
	User     string `json:"user"`
	// Ticket is the LaunchFile ticket.
	Ticket string `json:"ticket"`
	// Expires is when it can no longer be opened.
	Expires time.Time `json:"expires"`
}

// MaxLaunchFile bounds a launch file's size.
const MaxLaunchFile = 16 << 10

// ReadLaunchFile decodes a launch file and checks its form (not its ticket).
func ReadLaunchFile(r io.Reader) (LaunchFileDoc, error) {
	var d LaunchFileDoc
	b, err := io.ReadAll(io.LimitReader(r, MaxLaunchFile+1))
	if err != nil {
		return d, err
	}
	if len(b) > MaxLaunchFile {
		return d, fmt.Errorf("not a launch file: longer than %d bytes", MaxLaunchFile)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("not a launch file: %w", err)
	}
	switch {
	case d.Version != LaunchFileVersion:
		return d, fmt.Errorf("a launch file of version %d: this frontdoor reads version %d", d.Version, LaunchFileVersion)
	case len(d.LaunchURLs) == 0 || d.Resource == "" || d.Ticket == "":
		return d, errors.New("the launch file names no launch API, resource or ticket")
	}
	for _, u := range d.LaunchURLs {
		if !strings.HasPrefix(u, "https://") {
			return d, fmt.Errorf("the launch file names a launch API that is not https: %q", u)
		}
	}
	return d, nil
}

// CheckLaunchFile verifies a launch file's ticket and uses it up, site-wide (the ledger that
// records the launch tickets' uses): a second opening is refused with ErrReplayed. It
// returns the claims, whose Session names the resource.
func (v *Verifier) CheckLaunchFile(token string) (Claims, error) {
	c, err := v.parse(token)
	if err != nil {
		return c, err
	}
	now := v.now()
	if err := c.current(now); err != nil {
		return c, err
	}
	switch {
	case c.Kind != LaunchFile:
		return c, fmt.Errorf("%w: %v, not a launch file's ticket", ErrWrongKind, c.Kind)
	case !c.LoginExpires.IsZero() && !now.Before(c.LoginExpires):
		return c, fmt.Errorf("%w: %s logged in at %s", ErrLoginExpired, c.User, c.AuthTime.UTC().Format(time.RFC3339))
	}
	fresh, err := v.ledger.Use(c.ID, Channel{Proto: "launch-file"}, c.Expires.Add(clockSkew))
	if err != nil {
		return c, fmt.Errorf("recording the launch file's use: %w", err)
	}
	if !fresh {
		return c, fmt.Errorf("%w: the launch file was opened already", ErrReplayed)
	}
	return c, nil
}
