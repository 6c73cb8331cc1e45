package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("250ms", "1h"). The zero value
// means "not set" and is replaced by the field's default.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &lineError{line: n.Line, msg: "duration must be a string like \"250ms\""}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &lineError{line: n.Line, msg: fmt.Sprintf("duration %q does not parse (want e.g. \"250ms\", \"5s\", \"1h\")", n.Value)}
	}
	if v < 0 {
		return &lineError{line: n.Line, msg: fmt.Sprintf("duration %q is negative", n.Value)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// lineError is an error found while decoding, at a line of the file.
type lineError struct {
	line int
	msg  string
}

// Error formats the problem with its line.
func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// Error is one problem found in a configuration file.
type Error struct {
	File string // the file, or "" for bytes
	Line int    // the 1-based line, or 0 when unknown
	Path string // the key path, e.g. "machines[3].zone"
	Msg  string // what is wrong
}

// Error formats the problem as "file:line: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is the list of problems of one file; it is what Load returns when a file is invalid.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// ErrEmpty is returned for a file with no YAML document.
var ErrEmpty = errors.New("empty configuration")

// LoadFile reads, parses, defaults and validates the configuration in file.
func LoadFile(file string) (*Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Load(file, b)
}

// Load parses, defaults and validates a configuration; file names it in errors.
func Load(file string, b []byte) (*Config, error) {
	c, err := Parse(file, b)
	if err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

var unknownFieldRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type`)
var lineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// Parse decodes YAML strictly: unknown keys, wrong types and bad durations are errors that
// name file:line and the key path. It does not apply defaults or validate.
func Parse(file string, b []byte) (*Config, error) {
	c := &Config{File: file}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, Errors{syntaxError(file, err)}
	}
	if len(root.Content) == 0 {
		return nil, Errors{{File: file, Msg: ErrEmpty.Error()}}
	}
	c.lines = map[string]int{}
	values := map[string]string{}
	index(root.Content[0], "", c.lines, values)
	if es := textErrors(file, root.Content[0], reflect.TypeFor[Config](), ""); len(es) > 0 {
		return nil, es
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(c)
	if err == nil || errors.Is(err, io.EOF) {
		return c, nil
	}
	var le *lineError
	if errors.As(err, &le) {
		return nil, Errors{{File: file, Line: le.line, Path: c.pathAt(le.line), Msg: le.msg}}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return nil, Errors{syntaxError(file, err)}
	}
	var es Errors
	for _, m := range te.Errors {
		if s := unknownFieldRE.FindStringSubmatch(m); s != nil {
			line, _ := strconv.Atoi(s[1])
			es = append(es, &Error{File: file, Line: line, Path: c.keyPathAt(line, s[2]), Msg: fmt.Sprintf("unknown key %q", s[2])})
			continue
		}
		if s := lineRE.FindStringSubmatch(m); s != nil {
			line, _ := strconv.Atoi(s[1])
			es = append(es, &Error{File: file, Line: line, Path: c.valuePathAt(line, s[2], values), Msg: tidyTypeMsg(s[2])})
			continue
		}
		es = append(es, &Error{File: file, Msg: m})
	}
	return nil, es
}

var typeMsgRE = regexp.MustCompile("^cannot unmarshal !!(\\w+) (`.*` )?into (.*)$")

// tidyTypeMsg turns yaml's "cannot unmarshal !!str `x` into int" into plain words.
func tidyTypeMsg(m string) string {
	s := typeMsgRE.FindStringSubmatch(m)
	if s == nil {
		return m
	}
	kinds := map[string]string{"str": "text", "int": "a number", "float": "a number", "bool": "a boolean",
		"map": "a mapping", "seq": "a list", "null": "empty"}
	want := strings.NewReplacer("configs.", "", "[]", "a list of ", "*", "", "int", "a number",
		"uint32", "a number", "float64", "a number", "bool", "a boolean", "string", "text").Replace(s[3])
	got := kinds[s[1]]
	if got == "" {
		got = s[1]
	}
	if v := strings.Trim(strings.TrimSpace(s[2]), "`"); v != "" {
		return fmt.Sprintf("%q is %s, want %s", v, got, want)
	}
	return fmt.Sprintf("got %s, want %s", got, want)
}

func syntaxError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if s := lineRE.FindStringSubmatch(msg); s != nil {
		line, _ := strconv.Atoi(s[1])
		return &Error{File: file, Line: line, Msg: "YAML syntax: " + s[2]}
	}
	return &Error{File: file, Msg: "YAML syntax: " + msg}
}

// index records the line of every key path under n, and the value of every scalar.
func index(n *yaml.Node, path string, lines map[string]int, values map[string]string) {
	lines[path] = n.Line
	if n.Kind == yaml.ScalarNode {
		values[path] = n.Value
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			index(v, p, lines, values)
			lines[p] = k.Line
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			index(v, fmt.Sprintf("%s[%d]", path, i), lines, values)
		}
	}
}

// pathAt returns the deepest key path whose key sits on line, for decode errors.
func (c *Config) pathAt(line int) string {
	best := ""
	for p, l := range c.lines {
		if l == line && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// valuePathAt returns the path of the value a type error names ("cannot unmarshal !!str `x`
// into int"), or the shortest path on line when the error names no scalar.
func (c *Config) valuePathAt(line int, msg string, values map[string]string) string {
	best := ""
	v, hasValue := "", false
	if i := strings.IndexByte(msg, '`'); i >= 0 {
		if j := strings.IndexByte(msg[i+1:], '`'); j >= 0 {
			v, hasValue = msg[i+1:i+1+j], true
		}
	}
	for p, l := range c.lines {
		if l != line || (hasValue && values[p] != v) {
			continue
		}
		if best == "" || len(p) < len(best) {
			best = p
		}
	}
	return best
}

// keyPathAt returns the path of key on line, for unknown-key errors.
func (c *Config) keyPathAt(line int, key string) string {
	for p, l := range c.lines {
		if l == line && (p == key || strings.HasSuffix(p, "."+key)) {
			return p
		}
	}
	return c.pathAt(line)
}

// lineOf returns the line of path, or of its nearest ancestor present in the file.
func (c *Config) lineOf(path string) int {
	for p := path; p != ""; {
		if l, ok := c.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}
