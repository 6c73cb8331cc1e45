package devidp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Without Login, the authorization endpoint shows its users; the one picked is signed in:
// the redirect carries a code and the state, and the code (with the PKCE verifier and the
// client's secret) gives an ID token. The same code a second time, a wrong verifier, an
// unknown client and a redirect URI not registered are refused.
func TestTheLoginPageSignsInTheUserPicked(t *testing.T) {
	p, err := New("127.0.0.1:0", []Client{{ID: "console", Secret: "s", Redirects: []string{"https://fd.test/cb"}}},
		[]Identity{{Subject: "1", Username: "alice", Groups: []string{"staff"}}, {Subject: "2", Username: "erin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	verifier := "a-verifier-of-enough-length-for-pkce-0123456789"
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"client_id": {"console"}, "redirect_uri": {"https://fd.test/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "nonce": {"n"}, "code_challenge_method": {"S256"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}}
	resp, err := http.Get(p.Issuer + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `value="alice">alice (staff)`) || !strings.Contains(string(page), `value="erin">erin`) {
		t.Fatalf("the login page lacks its users:\n%s", page)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	q.Set("login_as", "erin")
	resp, err = noRedirect.PostForm(p.Issuer+"/authorize", q)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	to, _ := url.Parse(resp.Header.Get("Location"))
	code := to.Query().Get("code")
	if resp.StatusCode != http.StatusFound || to.Host != "fd.test" || to.Query().Get("state") != "st" || code == "" {
		t.Fatalf("the pick: %s to %s; want a redirect to fd.test with the state and a code", resp.Status, to)
	}
	exchange := func(client, secret, code, verifier string) (int, map[string]any) {
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"https://fd.test/cb"},
			"code_verifier": {verifier}, "client_id": {client}, "client_secret": {secret}}
		resp, err := http.PostForm(p.Issuer+"/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if st, _ := exchange("console", "s", code, "wrong"); st != http.StatusBadRequest {
		t.Fatalf("a wrong verifier: %d, want 400", st)
	}
	// The wrong verifier used the code up: a new one.
	resp, _ = noRedirect.PostForm(p.Issuer+"/authorize", q)
	resp.Body.Close()
	to, _ = url.Parse(resp.Header.Get("Location"))
	code = to.Query().Get("code")
	if st, _ := exchange("console", "wrong-secret", code, verifier); st != http.StatusBadRequest {
		t.Fatalf("a wrong secret: %d, want 400", st)
	}
	resp, _ = noRedirect.PostForm(p.Issuer+"/authorize", q)
	resp.Body.Close()
	to, _ = url.Parse(resp.Header.Get("Location"))
	code = to.Query().Get("code")
	st, m := exchange("console", "s", code, verifier)
	if st != http.StatusOK || m["id_token"] == nil {
		t.Fatalf("the exchange: %d %v, want an ID token", st, m)
	}
	if st, _ := exchange("console", "s", code, verifier); st != http.StatusBadRequest {
		t.Fatalf("the same code again: %d, want 400", st)
	}
	for name, bad := range map[string]url.Values{"an unknown client": {"client_id": {"other"}}, "an unregistered redirect": {"redirect_uri": {"https://evil.test/cb"}}} {
		v := url.Values{}
		for k := range q {
			v.Set(k, q.Get(k))
		}
		for k := range bad {
			v.Set(k, bad.Get(k))
		}
		resp, err := noRedirect.PostForm(p.Issuer+"/authorize", v)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %s, want 400", name, resp.Status)
		}
	}
}
