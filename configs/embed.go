package configs

import (
	"embed"
	"fmt"
)

//go:embed *.yaml
var shipped embed.FS

// Shipped returns the bytes of a configuration that ships with frontdoor, such as "lab.yaml".
func Shipped(name string) ([]byte, error) {
	b, err := shipped.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("no shipped config %q: %w", name, err)
	}
	return b, nil
}

// Lab loads the embedded lab site, the default of `frontdoor lab`.
func Lab() (*Config, error) {
	b, err := Shipped("lab.yaml")
	if err != nil {
		return nil, err
	}
	return Load("lab.yaml", b)
}
