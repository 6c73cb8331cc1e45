package gslb

import (
	"strings"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

func recordTXT(name string, n int) configs.Record {
	return configs.Record{Name: name, Type: "TXT", Value: strings.Repeat("x", n)}
}
