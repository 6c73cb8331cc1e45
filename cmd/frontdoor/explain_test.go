package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateExplain = flag.Bool("update-explain", false, "rewrite the explain golden files")

// run executes the frontdoor command line and returns its output.
func runExplainCLI(t *testing.T, args []string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestExplainGolden runs each testdata/explain/NAME.args and compares with NAME.golden.
func TestExplainGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/explain/*.args")
	if len(files) == 0 {
		t.Fatal("no golden cases")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".args")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runExplainCLI(t, append([]string{"explain"}, strings.Fields(string(raw))...))
			if err != nil {
				t.Fatalf("explain: %v\n%s", err, got)
			}
			golden := strings.TrimSuffix(f, ".args") + ".golden"
			if *updateExplain {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestExplainBadInput(t *testing.T) {
	lab := "../../configs/lab.yaml"
	for _, tc := range []struct {
		name  string
		state string
		args  []string
		want  string
	}{
		{"a state naming an unknown machine", "sessions: [{id: x, user: alice, resource: desktop, machine: nope, state: connected}]", nil, `machine "nope" is not in`},
		{"a state with a bad session state", "sessions: [{id: x, user: alice, resource: desktop, machine: vda-hq-1, state: sleeping}]", nil, `state "sleeping" is not one of`},
		{"a state with an unknown key", "machines: [{name: vda-hq-1, load: 5}]", nil, "field load not found"},
		{"a bad client address", "", []string{"--client-ip", "not-an-ip"}, "is not an IP address"},
		{"client-ip and location-zone together", "", []string{"--client-ip", "127.0.0.1", "--location-zone", "hq"}, "none of the others can be"},
		{"a factor there is not", "", []string{"--factors", "password,sms"}, `"sms" is not a factor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"explain", "--config", lab, "--user", "alice", "--resource", "desktop"}
			if tc.state != "" {
				p := filepath.Join(t.TempDir(), "state.yaml")
				os.WriteFile(p, []byte(tc.state), 0o644)
				args = append(args, "--state", p)
			}
			out, err := runExplainCLI(t, append(args, tc.args...))
			if err == nil || !strings.Contains(err.Error()+out, tc.want) {
				t.Fatalf("got %v\n%s\nwant an error containing %q", err, out, tc.want)
			}
		})
	}
}

// TestREADMEExplainExample runs the worked example of README.md (between the explain
// markers): it writes the state file shown there, runs the command shown, and compares with
// the output shown.
func TestREADMEExplainExample(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "<!-- BEGIN explain -->")
	end := strings.Index(readme, "<!-- END explain -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no explain section")
	}
	sec := readme[start:end]
	state := regexp.MustCompile("(?s)```yaml\n# state.yaml\n(.*?)```").FindStringSubmatch(sec)
	if state == nil {
		t.Fatal("no ```yaml block starting with '# state.yaml' in the explain section")
	}
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.yaml")
	os.WriteFile(statePath, []byte(state[1]), 0o644)
	examples := regexp.MustCompile("(?s)```console\n\\$ (frontdoor explain[^\n]*)\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(examples) == 0 {
		t.Fatal("no ```console block with a '$ frontdoor explain' command in the explain section")
	}
	for _, ex := range examples {
		t.Run(ex[1], func(t *testing.T) {
			var args []string
			for _, a := range strings.Fields(ex[1])[1:] {
				switch a {
				case "configs/lab.yaml":
					a = "../../configs/lab.yaml"
				case "state.yaml":
					a = statePath
				}
				args = append(args, a)
			}
			got, err := runExplainCLI(t, args)
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if got != ex[2] {
				t.Errorf("README shows:\n%s\nthe command prints:\n%s", ex[2], got)
			}
		})
	}
}

// explain takes the login's factors: a rule that requires a second factor denies a login
// with a password only (the default) and names itself, and allows one with the code.
func TestExplainFactors(t *testing.T) {
	raw, err := os.ReadFile("../../configs/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "site.yaml")
	extra := `
access_rules:
  - {name: staff-two-factors, action: allow, user_groups: [staff], factors: [password, totp]}
`
	site := strings.Replace(string(raw), "\nsite:\n", "\nsite:\n  auth: {totp_file: totp-secrets}\n", 1)
	if site == string(raw) {
		t.Fatal("lab.yaml has no site: section to add the TOTP file to")
	}
	os.WriteFile(cfg, []byte(site+extra), 0o644)
	args := []string{"explain", "--config", cfg, "--user", "alice", "--resource", "desktop"}
	out, err := runExplainCLI(t, args)
	if err != nil || !strings.Contains(out, "outcome: denied") || !strings.Contains(out, `access rule "staff-two-factors" (user group staff) requires the login factors password, totp: the login has password, lacks totp`) {
		t.Fatalf("explain with the default factors: %v\n%s", err, out)
	}
	out, err = runExplainCLI(t, append(args, "--factors", "password,totp"))
	if err != nil || strings.Contains(out, "outcome: denied") || !strings.Contains(out, "rule staff-two-factors allows it") {
		t.Fatalf("explain with password and totp: %v\n%s", err, out)
	}
}

// explain takes the groups an identity provider's token would name: an unlisted user is no
// user of the site without them, and launches through them, with their home zone.
func TestExplainGroups(t *testing.T) {
	args := []string{"explain", "--config", "../../configs/lab.yaml", "--user", "erin", "--resource", "desktop", "--factors", "oidc"}
	out, err := runExplainCLI(t, args)
	if err != nil || !strings.Contains(out, "outcome: denied") || !strings.Contains(out, `user "erin" is not a user of the site`) {
		t.Fatalf("explain of an unlisted user without groups: %v\n%s", err, out)
	}
	out, err = runExplainCLI(t, append(args, "--groups", "west-office"))
	if err != nil || strings.Contains(out, "outcome: denied") || !strings.Contains(out, "user erin: home zone west (user group west-office)") ||
		!strings.Contains(out, "user groups from the login: west-office") {
		t.Fatalf("explain of an unlisted user in west-office: %v\n%s", err, out)
	}
}
