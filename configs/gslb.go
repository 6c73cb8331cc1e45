package configs

// GSLB configures the authoritative DNS server.
type GSLB struct {
	// Domains are the zones (DNS zones, not site zones) frontdoor is authoritative for.
	// Default: none.
	Domains []Domain `yaml:"domains"`
	// Names are the GSLB names answered from health and the client's zone. Default: none.
	Names []GSLBName `yaml:"names"`
	// QueryLogSample logs one query in N with slog; 0 turns the query log off. Default: 0.
	QueryLogSample int `yaml:"query_log_sample"`
}

// Domain is one DNS zone served authoritatively.
type Domain struct {
	// Name is the apex, e.g. "vdi.example.com.". Required.
	Name string `yaml:"name"`
	// SOA is the start of authority. Default: see SOA.
	SOA SOA `yaml:"soa"`
	// NS are the name servers of the domain. Default: ["ns1.<name>"].
	NS []string `yaml:"ns"`
	// Records are static records. Default: none.
	Records []Record `yaml:"records"`
	// DNSSEC signs the domain's answers as they are given (ECDSA P-256, one key signing
	// both the keys and the zone), denial of existence by NSEC "black lies" (RFC 4470's
	// minimal answers): a name that does not exist answers NODATA. The key is the site's,
	// made at the first start (sealed in etcd on a site of several nodes); every node logs
	// the DS record to publish at the parent. A signed domain has no delegations (NS records
	// below its apex). Default: false.
	DNSSEC bool `yaml:"dnssec"`
}

// SOA is a start-of-authority record.
type SOA struct {
	// MName is the primary name server. Default: the first NS.
	MName string `yaml:"mname"`
	// RName is the responsible mailbox as a name. Default: "hostmaster.<domain>".
	RName string `yaml:"rname"`
	// Serial is the zone serial. Default: 1.
	Serial uint32 `yaml:"serial"`
	// Refresh is the SOA refresh. Default: 1h.
	Refresh Duration `yaml:"refresh"`
	// Retry is the SOA retry. Default: 10m.
	Retry Duration `yaml:"retry"`
	// Expire is the SOA expire. Default: 168h.
	Expire Duration `yaml:"expire"`
	// Minimum is the negative-caching TTL. Default: 30s.
	Minimum Duration `yaml:"minimum"`
	// TTL is the SOA record's own TTL. Default: 1h.
	TTL Duration `yaml:"ttl"`
}

// Record is one static DNS record.
type Record struct {
	// Name is the owner, relative to the domain ("www", "@" for the apex) or absolute
	// (ending in a dot). Required.
	Name string `yaml:"name"`
	// Type is A, AAAA, CNAME, TXT, MX, NS or CAA. Required.
	Type string `yaml:"type"`
	// TTL is the record's TTL. Default: 5m.
	TTL Duration `yaml:"ttl"`
	// Value is the record data: an address, a name, text, "preference name" for MX, or
	// "flags tag value" for CAA (ParseCAA: `0 issue "letsencrypt.org"`, which lets that
	// ACME CA alone issue for the name). Required.
	Value string `yaml:"value"`
}

// GSLBName is a name answered with the healthy front doors best for the client.
type GSLBName struct {
	// Name is the fully qualified name, inside one of the domains. Required.
	Name string `yaml:"name"`
	// Policy is failover (the best site's addresses), round_robin (rotate the best site's
	// addresses), weighted (pick by weight), or all_healthy (every healthy address, best site
	// first). Default: failover.
	Policy string `yaml:"policy"`
	// TTL is the answer TTL. Default: 5s.
	TTL Duration `yaml:"ttl"`
	// WhenNoneHealthy is fail_open (answer every address) or fail_closed (SERVFAIL).
	// Default: fail_open.
	WhenNoneHealthy string `yaml:"when_none_healthy"`
	// Initial is the state assumed before the first health verdicts: up or down.
	// Default: up.
	Initial string `yaml:"initial"`
	// Sites are the zones' front doors, in the default order for clients of no listed zone.
	// Required.
	Sites []GSLBSite `yaml:"sites"`
}

// GSLBSite is one zone's front doors behind a GSLB name.
type GSLBSite struct {
	// Zone is the site's zone. Required.
	Zone string `yaml:"zone"`
	// Gateways are the gateways whose public addresses and health make up the site.
	// Required.
	Gateways []string `yaml:"gateways"`
	// Fallback is the order of other zones tried for clients of this zone when it has
	// nothing healthy. Default: the order of Sites.
	Fallback []string `yaml:"fallback"`
	// Weight is the site's weight for the weighted policy. Default: 1.
	Weight int `yaml:"weight"`
	// LoadThreshold skips this site in fallback order when its load (percent) is above it,
	// when load is known. Default: 98.
	LoadThreshold *int `yaml:"load_threshold"`
}
