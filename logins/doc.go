// Package logins turns an HTTP request's credentials into one login: who, with which
// factors, checked when. It checks passwords (bcrypt, throttled per source and per user,
// with a bounded number of comparisons at once), client certificates of the site CA and the
// operator's CAs (package pki), one-time codes (TOTP), RADIUS passcodes or passwords, and ID
// tokens of the site's OpenID Connect provider, with the authorization code flow that web
// pages sign in by. The APIs of package api ask it; it answers no request itself.
package logins
