package configs

// Summary describes the configuration for `frontdoor config check`.
func (c *Config) Summary() string { return "" }
