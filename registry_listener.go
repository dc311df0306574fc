package main

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/BurntSushi/toml"
)

// The schema registry's listener, [schema_registry]: the Confluent
// Schema Registry REST API at its root (web.NewRegistry), on its own
// address so that clients configured with http://host:8081 find it where
// Confluent's would be. Logins, anonymity, timeouts and max_connections
// are [http]'s: one set of doors, one policy.

// checkSchemaRegistry validates [schema_registry].
func (c *Config) checkSchemaRegistry(bad func(k toml.Key, format string, args ...any) error) error {
	sr := &c.SchemaRegistry
	if sr.Listen == "" {
		if sr.CertFile != "" || sr.KeyFile != "" {
			return bad(toml.Key{"schema_registry", "cert_file"}, "set without schema_registry.listen (\"\" turns the registry off)")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(sr.Listen); err != nil {
		return bad(toml.Key{"schema_registry", "listen"}, "want host:port (or \"\" to turn the registry off), got %q", sr.Listen)
	}
	// As for [http] listen: anonymous writes to the registry from every
	// device on the LAN need the owner's say-so.
	if c.HTTP.Auth == authNone && !c.HTTP.AllowAnonymous && !loopbackListen(sr.Listen) {
		return bad(toml.Key{"schema_registry", "listen"}, "with http.auth = \"none\" anyone who can reach %s could register and delete schemas: set http.auth = \"basic\", listen on 127.0.0.1, or set http.allow_anonymous = true if that network is yours alone", sr.Listen)
	}
	if (sr.CertFile == "") != (sr.KeyFile == "") {
		return bad(toml.Key{"schema_registry", "cert_file"}, "HTTPS needs both cert_file and key_file")
	}
	if sr.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(sr.CertFile, sr.KeyFile); err != nil {
			return bad(toml.Key{"schema_registry", "cert_file"}, "%v", err)
		}
	}
	return nil
}

// registryListener binds [schema_registry] listen; nil when it is "".
func registryListener(cfg Config) (net.Listener, error) {
	if cfg.SchemaRegistry.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.SchemaRegistry.Listen)
	if err != nil {
		return nil, fmt.Errorf("schema_registry.listen: listen on %s: %w", cfg.SchemaRegistry.Listen, err)
	}
	return ln, nil
}

// registryDoor is [schema_registry] as serveDoor takes it.
func registryDoor(cfg Config) httpDoor {
	sr := cfg.SchemaRegistry
	return httpDoor{name: "schema_registry", table: "[schema_registry]", listen: sr.Listen, certFile: sr.CertFile, keyFile: sr.KeyFile}
}
