package broker

import "errors"

// Denial reasons (Decision.Err) and store errors. Denials are not returned as Launch errors: a
// denied launch is a Decision with Outcome Denied, its Err set to one of these and a Reason in
// words. Launch returns an error only when the store fails.
var (
	// ErrUnknownUser denies a launch by a user the site does not know.
	ErrUnknownUser = errors.New("unknown user")
	// ErrUnknownResource denies a launch of a resource the site does not publish.
	ErrUnknownResource = errors.New("unknown resource")
	// ErrNotEntitled denies a launch by a user the resource does not entitle.
	ErrNotEntitled = errors.New("user not entitled")
	// ErrAccessDenied denies a launch that an access rule (access_rules) denies; the
	// Reason names the rule.
	ErrAccessDenied = errors.New("access denied")
	// ErrNoMachines denies a launch of a resource whose groups hold no machine (for assigned
	// desktops: no machine assigned to the user).
	ErrNoMachines = errors.New("no machines")
	// ErrNoCapacity denies a launch when no suitable session exists and no machine may take a
	// new session (full, maintenance, down, or outside a home-zone-only restriction).
	ErrNoCapacity = errors.New("no capacity")
	// ErrZoneMissing denies a launch restricted to a home zone that the site no longer has.
	ErrZoneMissing = errors.New("home zone does not exist")

	// ErrMachineFull is returned by Store.CreateSession when the machine already holds
	// max_sessions live sessions.
	ErrMachineFull = errors.New("machine full")
	// ErrConflict is returned by Store.UpdateSession when the stored revision is not the
	// expected one (someone else changed the session first).
	ErrConflict = errors.New("session changed concurrently")
	// ErrNoSession is returned for a session id that does not exist (or has ended).
	ErrNoSession = errors.New("no such session")
	// ErrExists is returned by Store.CreateSession for a session id that is already used.
	ErrExists = errors.New("session id already exists")
	// ErrUnknownMachine is returned for a machine name the site does not have.
	ErrUnknownMachine = errors.New("unknown machine")
	// ErrBadTransition is returned for a lifecycle call that does not apply to the session's
	// state (e.g. Disconnected on a pending session).
	ErrBadTransition = errors.New("invalid session state transition")
)
