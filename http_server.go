package main

import (
	"fmt"
	"net"
	"net/http"
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
// Serve it on limitListener(ln, cfg.HTTP.MaxConnections).
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
