package kafkawire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/korvet/korvet/engine/auth"
)

// tlsHandshakeTimeout bounds a TLS handshake, so that a client that
// connects and says nothing does not hold a connection slot.
const tlsHandshakeTimeout = 10 * time.Second

// TLSConfig builds a TLS listener's configuration from PEM files: the
// server's certificate chain and key and, optionally, the CAs that sign
// client certificates. A client certificate is verified when given, and
// required with requireClientCert.
func TLSConfig(certFile, keyFile, clientCAFile string, requireClientCert bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if requireClientCert {
		if cfg.ClientCAs == nil {
			return nil, errors.New("requiring client certificates needs a client CA file")
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// start does what comes before the first request: the TLS handshake, and
// naming the principal. On a listener without SASL a verified client
// certificate names the user (its subject's common name); otherwise the
// principal is ANONYMOUS until SASL says who it is. false: close.
func (c *conn) start(ctx context.Context) bool {
	c.host = c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(c.host); err == nil {
		c.host = h
	}
	c.setPrincipal(auth.Anonymous)
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.s.log.Info("TLS handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && len(c.l.mechs) == 0 {
		name := certs[0].Subject.CommonName
		if name == "" {
			name = certs[0].Subject.String()
		}
		c.setPrincipal("User:" + name)
		c.s.log.Debug("client certificate", "remote", c.nc.RemoteAddr(), "principal", c.principal)
	}
	return true
}
