package kafkawire

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// Listener is one address clients connect to, with its own security: TLS
// or not, SASL or not, and the address Metadata and FindCoordinator give
// the clients connected to it (a client that came in over TLS must be sent
// back to the TLS port).
type Listener struct {
	net.Listener
	// Name is the listener's name among each broker's registered
	// listeners: ListenerPlaintext or ListenerTLS; empty means the one
	// that fits TLS. A client connected here is sent to other brokers on
	// their listener of the same name.
	Name string
	// TLS, when set, makes this a TLS listener (see TLSConfig).
	TLS *tls.Config
	// SASL lists the mechanisms offered (MechPlain, MechScramSHA256,
	// MechScramSHA512). When it is not empty, clients must authenticate
	// before anything but ApiVersions is served. PLAIN is left out on a
	// listener without TLS unless Options.AllowPlainWithoutTLS.
	SASL []string
	// AdvertisedHost and AdvertisedPort are this listener's address as
	// clients should use it.
	AdvertisedHost string
	AdvertisedPort int32
}

// Listener names: kafka.listen and kafka.tls, as brokers register them.
const (
	ListenerPlaintext = "PLAINTEXT"
	ListenerTLS       = "TLS"
)

// listener is a Listener being served.
type listener struct {
	Listener
	mechs []string // SASL mechanisms offered; empty: no authentication
}

// listeners checks ls against the options and works out what each offers.
func (s *Server) listeners(ls []Listener) ([]*listener, error) {
	if len(ls) == 0 {
		return nil, errors.New("no Kafka listener")
	}
	if s.opts.ACLs && s.opts.Auth == nil {
		return nil, errors.New("ACLs need a user store (Options.Auth)")
	}
	out := make([]*listener, 0, len(ls))
	for _, l := range ls {
		if l.Listener == nil {
			return nil, errors.New("listener without a net.Listener")
		}
		sl := &listener{Listener: l}
		if sl.Name == "" {
			sl.Name = ListenerPlaintext
			if l.TLS != nil {
				sl.Name = ListenerTLS
			}
		}
		for _, m := range l.SASL {
			switch {
			case !ValidMechanism(m):
				return nil, fmt.Errorf("listener %s: unknown SASL mechanism %q (use %s, %s or %s)", l.Addr(), m, MechScramSHA256, MechScramSHA512, MechPlain)
			case m == MechPlain && l.TLS == nil && !s.opts.AllowPlainWithoutTLS:
				// PLAIN sends the password itself: never in the clear
				// unless asked for.
				s.log.Warn("SASL PLAIN not offered on a listener without TLS (allow_plain_without_tls is off)", "listener", l.Addr().String())
				continue
			}
			sl.mechs = append(sl.mechs, m)
		}
		if len(l.SASL) > 0 && len(sl.mechs) == 0 {
			return nil, fmt.Errorf("listener %s: its only SASL mechanism, PLAIN, is refused without TLS; add a SCRAM mechanism, TLS, or allow_plain_without_tls", l.Addr())
		}
		if len(sl.mechs) > 0 && s.opts.Auth == nil {
			return nil, fmt.Errorf("listener %s: SASL needs a user store (Options.Auth)", l.Addr())
		}
		out = append(out, sl)
	}
	return out, nil
}

// advertised is the broker address for clients on this connection.
func (c *conn) advertised() (string, int32) { return c.l.AdvertisedHost, c.l.AdvertisedPort }
