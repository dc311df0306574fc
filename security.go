package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/kafkawire"
)

// tlsListenerConfig is [kafka.tls]: a second Kafka listener, over TLS.
type tlsListenerConfig struct {
	Listen            string `toml:"listen"`
	Advertised        string `toml:"advertised"`
	Auth              string `toml:"auth"`
	CertFile          string `toml:"cert_file"`
	KeyFile           string `toml:"key_file"`
	ClientCAFile      string `toml:"client_ca_file"`
	RequireClientCert bool   `toml:"require_client_cert"`
}

// Authentication modes: Kafka listeners take none or sasl, HTTP none or
// basic.
const (
	authNone  = "none"
	authSASL  = "sasl"
	authBasic = "basic"
)

// checkSecurity validates the listener, SASL and ACL keys.
func (c *Config) checkSecurity(bad func(k toml.Key, format string, args ...any) error) error {
	k, t := &c.Kafka, &c.Kafka.TLS
	if t.Listen != "" {
		if _, _, err := net.SplitHostPort(t.Listen); err != nil {
			return bad(toml.Key{"kafka", "tls", "listen"}, "want host:port, got %q", t.Listen)
		}
	}
	if k.Listen == "" && t.Listen == "" {
		return bad(toml.Key{"kafka", "listen"}, "no Kafka listener: set kafka.listen or kafka.tls.listen")
	}
	if t.Advertised != "" {
		if _, _, err := net.SplitHostPort(t.Advertised); err != nil {
			return bad(toml.Key{"kafka", "tls", "advertised"}, "want host:port, got %q", t.Advertised)
		}
	}
	for _, a := range []struct {
		key  toml.Key
		mode string
	}{{toml.Key{"kafka", "auth"}, k.Auth}, {toml.Key{"kafka", "tls", "auth"}, t.Auth}} {
		if a.mode != authNone && a.mode != authSASL {
			return bad(a.key, "want %q or %q, got %q", authNone, authSASL, a.mode)
		}
	}
	for i, m := range k.SASLMechanisms {
		if !kafkawire.ValidMechanism(m) {
			return bad(toml.Key{"kafka", "sasl_mechanisms"}, "unknown mechanism %q (use %s, %s or %s)", m, kafkawire.MechScramSHA256, kafkawire.MechScramSHA512, kafkawire.MechPlain)
		}
		if slices.Contains(k.SASLMechanisms[:i], m) {
			return bad(toml.Key{"kafka", "sasl_mechanisms"}, "%s listed twice", m)
		}
	}
	if (k.Auth == authSASL || t.Auth == authSASL) && len(k.SASLMechanisms) == 0 {
		return bad(toml.Key{"kafka", "sasl_mechanisms"}, "a listener uses SASL: list at least one mechanism")
	}
	if k.Listen != "" && k.Auth == authSASL && !k.AllowPlainWithoutTLS && !slices.ContainsFunc(k.SASLMechanisms, func(m string) bool { return m != kafkawire.MechPlain }) {
		return bad(toml.Key{"kafka", "auth"}, "PLAIN, the only mechanism, is refused on the listener without TLS; add a SCRAM mechanism, or set allow_plain_without_tls")
	}
	for _, u := range k.SuperUsers {
		if name, ok := strings.CutPrefix(u, "User:"); !ok || name == "" {
			return bad(toml.Key{"kafka", "super_users"}, "want principals like \"User:admin\", got %q", u)
		}
	}
	if err := c.checkHTTPSecurity(bad); err != nil {
		return err
	}
	if t.Listen == "" {
		return nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return bad(toml.Key{"kafka", "tls", "listen"}, "a TLS listener needs cert_file and key_file")
	}
	if t.RequireClientCert && t.ClientCAFile == "" {
		return bad(toml.Key{"kafka", "tls", "require_client_cert"}, "needs client_ca_file, the CA that signs client certificates")
	}
	if _, err := c.tlsConfig(); err != nil {
		return bad(toml.Key{"kafka", "tls", "cert_file"}, "%v", err)
	}
	return nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	t := c.Kafka.TLS
	return kafkawire.TLSConfig(t.CertFile, t.KeyFile, t.ClientCAFile, t.RequireClientCert)
}

// kafkaListeners opens the configured Kafka listeners.
func kafkaListeners(cfg Config) ([]kafkawire.Listener, error) {
	var ls []kafkawire.Listener
	add := func(listen, advertised, auth string, tlsCfg *tls.Config) error {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fmt.Errorf("kafka listen on %s: %w", listen, err)
		}
		host, port, err := advertisedAddr(advertised, listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("kafka advertised address: %w", err)
		}
		if port == 0 {
			port = int32(ln.Addr().(*net.TCPAddr).Port)
		}
		l := kafkawire.Listener{Listener: ln, TLS: tlsCfg, AdvertisedHost: host, AdvertisedPort: port}
		if auth == authSASL {
			l.SASL = cfg.Kafka.SASLMechanisms
		}
		ls = append(ls, l)
		return nil
	}
	var err error
	if cfg.Kafka.Listen != "" {
		err = add(cfg.Kafka.Listen, cfg.Kafka.Advertised, cfg.Kafka.Auth, nil)
	}
	if t := cfg.Kafka.TLS; err == nil && t.Listen != "" {
		var tlsCfg *tls.Config
		if tlsCfg, err = cfg.tlsConfig(); err == nil {
			err = add(t.Listen, t.Advertised, t.Auth, tlsCfg)
		}
	}
	if err != nil {
		closeListeners(ls)
		return nil, err
	}
	return ls, nil
}

func closeListeners(ls []kafkawire.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// listenerName names a listener in logs and on the status page.
func listenerName(l kafkawire.Listener) string {
	name := "Kafka"
	if l.TLS != nil {
		name += " TLS"
	}
	if len(l.SASL) > 0 {
		name += " SASL"
	}
	return name
}

// checkHTTPSecurity validates [http] auth and TLS and the first admin
// user. Anonymous HTTP is refused on any address but loopback unless the
// file says so: the page, /metrics and the KV view would be open to
// every phone and guest on the LAN.
func (c *Config) checkHTTPSecurity(bad func(k toml.Key, format string, args ...any) error) error {
	h := &c.HTTP
	if h.Auth != authNone && h.Auth != authBasic {
		return bad(toml.Key{"http", "auth"}, "want %q or %q, got %q", authNone, authBasic, h.Auth)
	}
	if h.Auth == authNone && !h.AllowAnonymous && !loopbackListen(h.Listen) {
		return bad(toml.Key{"http", "auth"}, "\"none\" would serve the status page, /metrics and every topic's values to anyone who can reach %s: set auth = \"basic\" (log in with the users of `korvet user add`), listen on 127.0.0.1, or set allow_anonymous = true if that network is yours alone", h.Listen)
	}
	for _, name := range h.Hosts {
		if name == "" || strings.ContainsAny(name, " :/[]@") {
			return bad(toml.Key{"http", "hosts"}, "want host names without port, like \"nas.lan\", got %q", name)
		}
	}
	if (h.CertFile == "") != (h.KeyFile == "") {
		return bad(toml.Key{"http", "cert_file"}, "HTTPS needs both cert_file and key_file")
	}
	if h.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(h.CertFile, h.KeyFile); err != nil {
			return bad(toml.Key{"http", "cert_file"}, "%v", err)
		}
	}
	if c.AdminUser != "" {
		if err := auth.ValidUserName(c.AdminUser); err != nil {
			return bad(toml.Key{"admin_user"}, "%v", err)
		}
		if c.AdminPasswordFile == "" {
			return bad(toml.Key{"admin_password_file"}, "admin_user %q needs a file with its first password", c.AdminUser)
		}
	}
	return nil
}

// loopbackListen reports whether host:port listens on loopback only.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// superUsers are kafka.super_users and the admin user: super on every
// door.
func (c *Config) superUsers() []string {
	su := slices.Clone(c.Kafka.SuperUsers)
	if p := "User:" + c.AdminUser; c.AdminUser != "" && !slices.Contains(su, p) {
		su = append(su, p)
	}
	return su
}

// ensureAdmin creates admin_user from admin_password_file when the user
// has no credentials yet; an existing user is left as it is (change its
// password with `korvet user add`).
func ensureAdmin(ctx context.Context, cfg Config, users *auth.Store, log *slog.Logger) error {
	if cfg.AdminUser == "" {
		return nil
	}
	b, err := os.ReadFile(cfg.AdminPasswordFile)
	if err != nil {
		return fmt.Errorf("admin_password_file: %w", err)
	}
	password, _, _ := strings.Cut(string(b), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return fmt.Errorf("admin_password_file %s: the first line is empty", cfg.AdminPasswordFile)
	}
	created, err := users.AddUserIfAbsent(ctx, cfg.AdminUser, password, auth.DefaultIterations)
	if err != nil {
		return fmt.Errorf("create admin_user %q: %w", cfg.AdminUser, err)
	}
	if created {
		log.Info("created the admin user from admin_password_file", "user", cfg.AdminUser, "file", cfg.AdminPasswordFile)
	}
	return nil
}
