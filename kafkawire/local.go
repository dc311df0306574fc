package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Caller is who runs a request through Local: the HTTP admin API's
// logged-in principal.
type Caller struct {
	Principal string // "User:name"
	// Super makes the caller a super user whatever kafka.super_users says
	// (the local admin socket, the admin token).
	Super bool
	Host  string // remote IP, for host-scoped ACLs and logs
}

// ErrNotServed is Local's answer for an API this korvet does not serve to
// in-process callers: SASL and ApiVersions (they belong to a connection),
// the ACL APIs with ACLs off, the SCRAM user APIs without a user store.
var ErrNotServed = errors.New("API not served")

// Local runs req as who would over a Kafka connection: the API's
// authorization rule, then its handler (conn.handle), on an in-process
// connection without a socket. The admin API gets Kafka's semantics,
// validation and ACL checks, with no second implementation to drift.
// req is sent at the highest version korvet serves of its API; Local sets
// it. A handler's panic is an error, not a crash.
func (s *Server) Local(ctx context.Context, who Caller, req kmsg.Request) (resp kmsg.Response, err error) {
	key := kmsg.Key(req.Key())
	switch key {
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate, kmsg.ApiVersions:
		return nil, fmt.Errorf("%s: %w in process", kmsg.NameForKey(req.Key()), ErrNotServed)
	}
	c := s.localConn(who)
	defer close(c.readDone) // a waiting ShareFetch stops with the call
	a, ok := c.api(key)
	if !ok {
		return nil, fmt.Errorf("%s: %w by this korvet", kmsg.NameForKey(req.Key()), ErrNotServed)
	}
	req.SetVersion(a.max)
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panic in an in-process request", "api", kmsg.NameForKey(req.Key()), "principal", who.Principal, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%s: internal error in korvet (logged)", kmsg.NameForKey(req.Key()))
		}
	}()
	resp = c.handle(ctx, a, req)()
	if c.hangup {
		return nil, fmt.Errorf("%s: refused (no authorization rule)", kmsg.NameForKey(req.Key()))
	}
	if resp == nil {
		return nil, fmt.Errorf("%s: no response (acks=0?)", kmsg.NameForKey(req.Key()))
	}
	return resp, nil
}

// localConn is a conn for one in-process request. It answers as if it came
// in on the first listener served (what Metadata tells of this broker);
// before Serve, on Options' advertised address.
func (s *Server) localConn(who Caller) *conn {
	s.mu.Lock()
	l := s.localListener
	s.mu.Unlock()
	if l == nil {
		l = &listener{Listener: Listener{Name: ListenerPlaintext, AdvertisedHost: s.opts.AdvertisedHost, AdvertisedPort: s.opts.AdvertisedPort}}
	}
	c := &conn{s: s, nc: localNetConn{addr: localAddr(who.Host)}, l: l, host: who.Host, readDone: make(chan struct{})}
	c.setPrincipal(who.Principal)
	c.super = c.super || who.Super
	c.sasl.done = true
	return c
}

// setLocalListener remembers what Local's connections are told of this
// broker: the first listener, without its SASL mechanisms (an in-process
// caller is logged in already).
func (s *Server) setLocalListener(ls []*listener) {
	if len(ls) == 0 {
		return
	}
	l := &listener{Listener: ls[0].Listener}
	s.mu.Lock()
	s.localListener = l
	s.mu.Unlock()
}

// localAddr is an in-process caller's address: its HTTP remote IP.
type localAddr string

func (a localAddr) Network() string { return "local" }
func (a localAddr) String() string  { return string(a) }

// localNetConn stands in for the socket of a Local request: handlers only
// log its address. Nothing is read or written.
type localNetConn struct{ addr localAddr }

var errLocalConn = errors.New("in-process request has no socket")

func (localNetConn) Read([]byte) (int, error)         { return 0, errLocalConn }
func (localNetConn) Write([]byte) (int, error)        { return 0, errLocalConn }
func (localNetConn) Close() error                     { return nil }
func (c localNetConn) LocalAddr() net.Addr            { return localAddr("korvet") }
func (c localNetConn) RemoteAddr() net.Addr           { return c.addr }
func (localNetConn) SetDeadline(time.Time) error      { return nil }
func (localNetConn) SetReadDeadline(time.Time) error  { return nil }
func (localNetConn) SetWriteDeadline(time.Time) error { return nil }
