package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
)

// httpMaxHeaderBytes bounds a request's header (net/http's default is
// 1 MiB, which max_connections idle clients could each hold).
const httpMaxHeaderBytes = 64 << 10

// newHTTPServer returns the server of the HTTP listener, with the
// timeouts of [http]: a client that sends its header or body slowly, or
// reads the answer slowly, or keeps an idle connection, is cut off.
// serveHTTP serves it.
func newHTTPServer(cfg Config, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.Duration,
		ReadTimeout:       cfg.HTTP.ReadTimeout.Duration,
		WriteTimeout:      cfg.HTTP.WriteTimeout.Duration,
		IdleTimeout:       cfg.HTTP.IdleTimeout.Duration,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// serveHTTP serves h on ln, over HTTPS with [http] cert_file, at most
// [http] max_connections at a time, until Shutdown.
func serveHTTP(cfg Config, ln net.Listener, h http.Handler, log *slog.Logger) *http.Server {
	return serveDoor(cfg, httpDoor{name: "http", table: "[http]", listen: cfg.HTTP.Listen, certFile: cfg.HTTP.CertFile, keyFile: cfg.HTTP.KeyFile}, ln, h, log)
}

// httpDoor is one HTTP listener: [http]'s, or [schema_registry]'s, which
// has its own address and certificate but [http]'s logins and limits.
type httpDoor struct {
	name, table       string // for logs: "http", "[http]"
	listen            string
	certFile, keyFile string
}

// serveDoor serves h on ln as d says, with [http]'s timeouts and
// max_connections, until Shutdown.
func serveDoor(cfg Config, d httpDoor, ln net.Listener, h http.Handler, log *slog.Logger) *http.Server {
	hs := newHTTPServer(cfg, h)
	if cfg.HTTP.Auth == authBasic && d.certFile == "" && !loopbackListen(d.listen) {
		log.Warn("HTTP Basic logins cross the network in the clear: set "+d.table+" cert_file and key_file for HTTPS", d.name, ln.Addr().String())
	}
	go func() {
		var err error
		if ln := limitListener(ln, cfg.HTTP.MaxConnections); d.certFile != "" {
			err = hs.ServeTLS(ln, d.certFile, d.keyFile)
		} else {
			err = hs.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(d.name+" server", "err", err)
		}
	}()
	return hs
}

// checkHTTPLimits validates the [http] limits; bad names a key.
func (c *Config) checkHTTPLimits(bad func(k toml.Key, format string, args ...any) error) error {
	h := &c.HTTP
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"read_header_timeout", h.ReadHeaderTimeout.Duration},
		{"read_timeout", h.ReadTimeout.Duration},
		{"write_timeout", h.WriteTimeout.Duration},
		{"idle_timeout", h.IdleTimeout.Duration},
	} {
		if d.v < 100*time.Millisecond || d.v > 24*time.Hour {
			return bad(toml.Key{"http", d.key}, "must be 100ms to 24h")
		}
	}
	if h.ReadHeaderTimeout.Duration > h.ReadTimeout.Duration {
		return bad(toml.Key{"http", "read_header_timeout"}, "must not be longer than http.read_timeout (%v), which includes it", h.ReadTimeout.Duration)
	}
	if h.MaxConnections < 1 || h.MaxConnections > 1<<20 {
		return bad(toml.Key{"http", "max_connections"}, "must be 1 to 1048576")
	}
	if h.KVMgetMaxBytes < 1024 || h.KVMgetMaxBytes > 1<<30 {
		return bad(toml.Key{"http", "kv_mget_max_bytes"}, "must be 1024 to 1073741824")
	}
	return nil
}

// checkHTTPSecurity validates [http] auth, hosts and TLS. Anonymous HTTP is refused on any address but loopback unless the
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

// limitListener accepts at most n connections at a time: past that,
// Accept waits for one to close, and new clients wait in the kernel's
// accept queue (refused once it is full), costing korvet nothing.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{} // one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, fmt.Errorf("accept: %w", net.ErrClosed)
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, l: l}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its token back on the first Close.
type limitedConn struct {
	net.Conn
	l    *limitedListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.l.slots })
	return err
}
