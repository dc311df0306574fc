package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/web"
)

// The Kafka listeners: [kafka] listen and [kafka.tls], each with its
// authentication, checked when the config loads and opened by serve.

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

// checkListeners validates the doors' keys: the Kafka listeners with
// their SASL mechanisms and super users, then HTTP's and admin_user, then
// the TLS listener's certificates.
func (c *Config) checkListeners(bad func(k toml.Key, format string, args ...any) error) error {
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
	if err := c.checkAdminUser(bad); err != nil {
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
	add := func(name, listen, advertised, auth string, tlsCfg *tls.Config) error {
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
		l := kafkawire.Listener{Name: name, Listener: ln, TLS: tlsCfg, AdvertisedHost: host, AdvertisedPort: port}
		if auth == authSASL {
			l.SASL = cfg.Kafka.SASLMechanisms
		}
		ls = append(ls, l)
		return nil
	}
	var err error
	if cfg.Kafka.Listen != "" {
		err = add(kafkawire.ListenerPlaintext, cfg.Kafka.Listen, cfg.Kafka.Advertised, cfg.Kafka.Auth, nil)
	}
	if t := cfg.Kafka.TLS; err == nil && t.Listen != "" {
		var tlsCfg *tls.Config
		if tlsCfg, err = cfg.tlsConfig(); err == nil {
			err = add(kafkawire.ListenerTLS, t.Listen, t.Advertised, t.Auth, tlsCfg)
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

// describeListeners lists each listener's address and advertised address
// for the status page, and as attributes of the start message.
func describeListeners(ls []kafkawire.Listener) (shown []web.Listener, logAttrs []any) {
	for _, l := range ls {
		name, advertised := listenerName(l), net.JoinHostPort(l.AdvertisedHost, fmt.Sprint(l.AdvertisedPort))
		shown = append(shown, web.Listener{Name: name, Address: l.Addr().String()}, web.Listener{Name: name + " advertised", Address: advertised})
		key := strings.ToLower(strings.ReplaceAll(name, " ", "_"))
		logAttrs = append(logAttrs, key, l.Addr().String(), key+"_advertised", advertised)
	}
	return shown, logAttrs
}

// engineListeners are the Kafka listeners as the engine registers them in
// Redis for the other brokers: name and advertised address.
func engineListeners(ls []kafkawire.Listener) []engine.ListenerAddr {
	out := make([]engine.ListenerAddr, 0, len(ls))
	for _, l := range ls {
		name := l.Name
		if name == "" {
			name = kafkawire.ListenerPlaintext
			if l.TLS != nil {
				name = kafkawire.ListenerTLS
			}
		}
		out = append(out, engine.ListenerAddr{Name: name, Host: l.AdvertisedHost, Port: l.AdvertisedPort})
	}
	return out
}
