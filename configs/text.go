package configs

import (
	"encoding"
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Addresses and ranges are netip values in the schema (netip.Addr, netip.AddrPort,
// netip.Prefix), parsed once, here, at load. The YAML decoder parses them through
// encoding.TextUnmarshaler but reports a bad one without its line, so Parse first walks the
// document beside the schema's types and tries each such scalar itself (textErrors): a bad
// address is then an Error that names the file, the line and the key like every other.

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
)

// textErrors returns the errors of the scalars under n, found at path, that decode into a
// value of type t (or into its fields, elements and values) through UnmarshalText.
func textErrors(file string, n *yaml.Node, t reflect.Type, path string) Errors {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(textUnmarshaler) && !pt.Implements(yamlUnmarshaler) {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return nil // the decoder names a wrong kind of node itself
		}
		u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			return Errors{{File: file, Line: n.Line, Path: path, Msg: textMsg(t, n.Value, err)}}
		}
		return nil
	}
	var es Errors
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if f, ok := fieldOf(t, k); ok {
				es = append(es, textErrors(file, n.Content[i+1], f.Type, join(path, k))...)
			}
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, v := range n.Content {
			es = append(es, textErrors(file, v, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			es = append(es, textErrors(file, n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
	}
	return es
}

// fieldOf returns the field of struct type t that YAML key k decodes into, also through
// an ",inline" struct.
func fieldOf(t reflect.Type, k string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			if in, ok := fieldOf(f.Type, k); ok {
				return in, true
			}
			continue
		}
		if name == k && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// textMsg says what a value of type t should have looked like.
func textMsg(t reflect.Type, v string, err error) string {
	switch t {
	case reflect.TypeFor[netip.Addr]():
		return fmt.Sprintf("%q is not an IP address", v)
	case reflect.TypeFor[netip.AddrPort]():
		return fmt.Sprintf("%q is not an address:port (e.g. 127.0.0.1:443 or [::1]:443)", v)
	case reflect.TypeFor[netip.Prefix]():
		if a, perr := netip.ParseAddr(v); perr == nil {
			return fmt.Sprintf("%q is not a CIDR range: write %s/%d for the one address", v, v, a.BitLen())
		}
		return fmt.Sprintf("%q is not a CIDR range (e.g. 10.1.0.0/16, 2001:db8::/32)", v)
	}
	return fmt.Sprintf("%q: %v", v, err)
}
