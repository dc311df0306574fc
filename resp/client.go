// Package resp is a small Redis client speaking RESP2 over TCP or a unix
// socket, built on tidwall/redcon's encoder and reply parser.
//
// It is made for korvet's storage path: commands are batched into a
// Pipeline and sent in one round trip by Exec, replies are read into one
// pooled buffer and handed out without copying, and connection failures
// are told apart from Redis error replies (IsConnError), because after a
// connection failure the outcome of the commands is unknown.
package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Defaults for zero Options fields.
const (
	DefaultPoolSize      = 8
	DefaultDialTimeout   = 5 * time.Second
	DefaultTimeout       = 10 * time.Second
	DefaultMaxReplyBytes = 512 << 20
)

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// Options tune a Client. Zero fields take the defaults.
type Options struct {
	PoolSize      int           // max open connections, default 8
	DialTimeout   time.Duration // connect plus handshake, default 5s
	Timeout       time.Duration // per call when ctx has no deadline, default 10s
	MaxReplyBytes int           // larger replies fail and drop the connection, default 512 MiB
	Logger        *slog.Logger  // default discards

	// Cluster makes the client a Redis Cluster client: the URL names any
	// one node, Seeds more, and commands go to the master of their key's
	// slot (cluster.go). PoolSize is then per node.
	Cluster bool
	Seeds   []string // more nodes to learn the cluster from, host:port

	// TLS configures rediss:// connections: a CA pool (RootCAs), a client
	// certificate, or InsecureSkipVerify, chosen by the caller. Nil means
	// the system roots. ServerName defaults to the host dialled.
	TLS *tls.Config
}

// Client is a pool of Redis connections, safe for concurrent use.
type Client struct {
	cfg    Config
	opts   Options
	log    *slog.Logger
	dialer net.Dialer

	sem  chan struct{} // one token per open or dialing connection
	done chan struct{} // closed by Close, wakes waiters

	mu       sync.Mutex
	idle     []*conn
	closed   bool
	backoff  time.Duration // current dial backoff; 0 when Redis is reachable
	nextDial time.Time     // no dial before this
	dialErr  error         // last dial failure, reported during backoff

	pipes   sync.Pool // *Pipeline, for Do
	replies sync.Pool // *Replies

	cl *cluster // non-nil for a Redis Cluster client
}

type conn struct {
	nc     net.Conn
	broken bool   // saw an I/O, protocol or timeout error: never reuse
	stop   func() // sets a past deadline, interrupting blocked I/O
	carry  []byte // read past the replies Conn.Receive wanted: the next ones'
}

// New returns a Client for a URL (see ParseURL). It does not connect:
// connections are dialed when first needed.
func New(url string, opts Options) (*Client, error) {
	cfg, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	return NewFromConfig(cfg, opts)
}

// NewFromConfig is New for an already parsed Config.
func NewFromConfig(cfg Config, opts Options) (*Client, error) {
	if cfg.Network != "tcp" && cfg.Network != "unix" {
		return nil, fmt.Errorf("resp: network %q not supported (want tcp or unix)", cfg.Network)
	}
	if cfg.Addr == "" {
		return nil, errors.New("resp: empty address")
	}
	if cfg.DB < 0 {
		return nil, fmt.Errorf("resp: negative db %d", cfg.DB)
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = DefaultPoolSize
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxReplyBytes
	}
	c := &Client{
		cfg:  cfg,
		opts: opts,
		log:  opts.Logger,
		sem:  make(chan struct{}, opts.PoolSize),
		done: make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("redis", cfg.Addr)
	c.pipes.New = func() any { return new(Pipeline) }
	c.replies.New = func() any { return &Replies{pool: &c.replies} }
	if opts.Cluster {
		cl, err := newCluster(c)
		if err != nil {
			return nil, err
		}
		c.cl = cl
	}
	return c, nil
}

// Addr returns the address the client dials (host:port or socket path).
func (c *Client) Addr() string { return c.cfg.Addr }

// Close closes idle connections; connections in use close when released.
// Calls after Close fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	idle := c.idle
	c.idle = nil
	close(c.done)
	c.mu.Unlock()
	var errs []error
	for _, cn := range idle {
		if err := cn.nc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cl != nil {
		if err := c.cl.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resp: close: %w", err)
	}
	return nil
}

// Ping checks that Redis answers.
func (c *Client) Ping(ctx context.Context) error {
	r, err := c.Do(ctx, "PING")
	if err != nil {
		return err
	}
	if string(r.Bytes()) != "PONG" {
		return fmt.Errorf("resp: PING answered %q", r.Bytes())
	}
	return nil
}

// Do sends one command and returns its reply, copied so that it outlives
// the call. An error reply is returned as an *Error (and as the Reply).
func (c *Client) Do(ctx context.Context, args ...any) (Reply, error) {
	p := c.pipes.Get().(*Pipeline)
	p.Cmd(args...)
	rs, err := c.Exec(ctx, p)
	c.putPipeline(p)
	return single(rs, err)
}

func single(rs *Replies, err error) (Reply, error) {
	if err != nil {
		return Reply{}, err
	}
	r := rs.At(0).clone()
	rs.Release()
	if err := r.Err(); err != nil {
		return r, err
	}
	return r, nil
}

func (c *Client) putPipeline(p *Pipeline) {
	if cap(p.buf) > maxPooledBuf {
		p.buf = nil
	}
	p.Reset()
	c.pipes.Put(p)
}

// Exec sends all commands of p in one write and reads all their replies.
// Error replies are per reply (Reply.Err) and do not fail Exec; an error
// means the connection failed (IsConnError; the commands' outcome is
// unknown if errors.Is(err, ErrUnknownOutcome)), p is malformed, or the
// client is closed. The caller must Release the Replies.
func (c *Client) Exec(ctx context.Context, p *Pipeline) (*Replies, error) {
	if err := p.Err(); err != nil {
		return nil, err
	}
	if p.n == 0 {
		return c.getReplies(), nil
	}
	if c.cl != nil {
		if c.isClosed() {
			return nil, ErrClosed
		}
		return c.cl.exec(ctx, p)
	}
	cn, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	rs, err := c.exec(ctx, cn, p)
	c.put(cn)
	return rs, err
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) getReplies() *Replies {
	rs := c.replies.Get().(*Replies)
	rs.released = false
	rs.buf = rs.buf[:0]
	rs.ends = rs.ends[:0]
	rs.list = rs.list[:0]
	rs.fr.spans = rs.fr.spans[:0] // replies assembled here have no Marks
	return rs
}

// exec runs one round trip on cn, marking it broken on any failure.
func (c *Client) exec(ctx context.Context, cn *conn, p *Pipeline) (*Replies, error) {
	if err := p.Err(); err != nil {
		return nil, err
	}
	rs := c.getReplies()
	if p.n == 0 {
		return rs, nil
	}
	if err := ctx.Err(); err != nil {
		rs.Release()
		return nil, &ConnError{Op: "send", Addr: c.cfg.Addr, Err: err}
	}
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(c.opts.Timeout)
	}
	op, sent, err := cn.roundTrip(ctx, deadline, p, rs, c.opts.MaxReplyBytes)
	if err != nil {
		rs.Release()
		return nil, c.ioError(ctx, op, sent, hasDeadline, err)
	}
	if op == "trailing" {
		c.log.Warn("redis sent bytes after the last expected reply; dropping the connection")
	}
	return rs, nil
}

// roundTrip writes p and reads its replies into rs. op names the step that
// failed; sent tells whether any byte of p may have reached the server.
func (cn *conn) roundTrip(ctx context.Context, deadline time.Time, p *Pipeline, rs *Replies, maxReply int) (op string, sent bool, err error) {
	if err := cn.nc.SetDeadline(deadline); err != nil {
		cn.broken = true
		return "set deadline", false, err
	}
	// Cancellation must interrupt I/O already blocked in the kernel; a
	// past deadline does that.
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, cn.stop)
	}
	op = "write"
	n, err := cn.nc.Write(p.buf)
	sent = n > 0
	var trailing bool
	if err == nil {
		op = "read"
		trailing, err = readReplies(cn.nc, rs, p.n, maxReply, nil, p.mark)
	}
	if stop != nil && !stop() {
		// The interrupt ran or is running: its past deadline could hit
		// the connection's next user.
		cn.broken = true
	}
	if err != nil {
		cn.broken = true
		return op, sent, err
	}
	if trailing {
		cn.broken = true
		return "trailing", sent, nil
	}
	return "", sent, nil
}

// ioError classifies a failed round trip. A server that closed or reset
// the connection has likely dropped every connection (restart, crash), so
// the idle ones are closed too rather than failing their next callers.
func (c *Client) ioError(ctx context.Context, op string, sent, hasDeadline bool, err error) error {
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		if hasDeadline {
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		} else {
			err = fmt.Errorf("no reply within %v: %w", c.opts.Timeout, err)
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		c.dropIdle()
	}
	return &ConnError{Op: op, Addr: c.cfg.Addr, Sent: sent, Err: err}
}

func (c *Client) dropIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, cn := range idle {
		_ = cn.nc.Close()
	}
}

// get takes a connection from the pool, dialing one if none is idle.
func (c *Client) get(ctx context.Context) (*conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &ConnError{Op: "acquire", Addr: c.cfg.Addr, Err: err}
	}
	select {
	case c.sem <- struct{}{}:
	default:
		if err := c.waitSlot(ctx); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.sem
		return nil, ErrClosed
	}
	if n := len(c.idle); n > 0 {
		cn := c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return cn, nil
	}
	if wait := time.Until(c.nextDial); wait > 0 {
		err := &ConnError{Op: "dial", Addr: c.cfg.Addr,
			Err: fmt.Errorf("redis is unreachable, next attempt in %v: %w", wait.Round(time.Millisecond), c.dialErr)}
		c.mu.Unlock()
		<-c.sem
		return nil, err
	}
	c.mu.Unlock()

	cn, err := c.dial(ctx)
	c.dialed(ctx, err)
	if err != nil {
		<-c.sem
		return nil, err
	}
	return cn, nil
}

// waitSlot waits for a pool slot, bounded by ctx or, lacking a deadline,
// by Timeout.
func (c *Client) waitSlot(ctx context.Context) error {
	var timeout <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(c.opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &ConnError{Op: "acquire", Addr: c.cfg.Addr,
			Err: fmt.Errorf("all %d connections busy: %w", c.opts.PoolSize, ctx.Err())}
	case <-timeout:
		return &ConnError{Op: "acquire", Addr: c.cfg.Addr,
			Err: fmt.Errorf("all %d connections busy for %v", c.opts.PoolSize, c.opts.Timeout)}
	case <-c.done:
		return ErrClosed
	}
}

// dialed updates the backoff after a dial attempt.
func (c *Client) dialed(ctx context.Context, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		if c.backoff > 0 {
			c.log.Info("redis reachable again")
		}
		c.backoff, c.nextDial, c.dialErr = 0, time.Time{}, nil
		return
	}
	if ctx.Err() != nil {
		return // the caller gave up: that says nothing about Redis
	}
	now := time.Now()
	// Keep the cause only: the backoff error adds the op and address.
	c.dialErr = err
	var ce *ConnError
	if errors.As(err, &ce) {
		c.dialErr = ce.Err
		if ce.Op != "dial" {
			c.dialErr = fmt.Errorf("%s: %w", ce.Op, ce.Err)
		}
	}
	if now.Before(c.nextDial) {
		return // a concurrent dial already started this backoff window
	}
	if c.backoff == 0 {
		c.backoff = minBackoff
		c.log.Warn("redis unreachable", "err", err)
	} else {
		c.backoff = min(2*c.backoff, maxBackoff)
	}
	c.nextDial = now.Add(c.backoff)
}

// put returns a connection to the pool, or closes it if it is broken.
func (c *Client) put(cn *conn) {
	c.mu.Lock()
	if cn.broken || c.closed {
		c.mu.Unlock()
		_ = cn.nc.Close()
	} else {
		c.idle = append(c.idle, cn)
		c.mu.Unlock()
	}
	<-c.sem
}

var pastTime = time.Unix(1, 0)

// dial connects and runs the handshake: AUTH, SELECT, CLIENT SETNAME in
// one round trip.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	nc, err := c.dialer.DialContext(dctx, c.cfg.Network, c.cfg.Addr)
	if err != nil {
		return nil, &ConnError{Op: "dial", Addr: c.cfg.Addr, Err: err}
	}
	if c.cfg.TLS {
		tc := tls.Client(nc, c.tlsConfig())
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = nc.Close()
			return nil, &ConnError{Op: "tls handshake", Addr: c.cfg.Addr, Err: err}
		}
		nc = tc
	}
	cn := &conn{nc: nc}
	cn.stop = func() { _ = nc.SetDeadline(pastTime) }
	if err := c.handshake(dctx, cn); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return cn, nil
}

// tlsConfig is Options.TLS (or a default) naming the host dialled.
func (c *Client) tlsConfig() *tls.Config {
	var tc *tls.Config
	if c.opts.TLS != nil {
		tc = c.opts.TLS.Clone()
	} else {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(c.cfg.Addr); err == nil {
			tc.ServerName = host
		}
	}
	return tc
}

func (c *Client) handshake(ctx context.Context, cn *conn) error {
	p := c.pipes.Get().(*Pipeline)
	defer c.putPipeline(p)
	var names []string
	if c.cfg.Password != "" {
		if c.cfg.Username != "" {
			p.Cmd("AUTH", c.cfg.Username, c.cfg.Password)
		} else {
			p.Cmd("AUTH", c.cfg.Password)
		}
		names = append(names, "AUTH")
	}
	if c.cfg.DB != 0 {
		p.Cmd("SELECT", c.cfg.DB)
		names = append(names, "SELECT")
	}
	p.Cmd("CLIENT", "SETNAME", "korvet")
	names = append(names, "CLIENT SETNAME")

	deadline, _ := ctx.Deadline()
	rs := c.getReplies()
	defer rs.Release()
	op, _, err := cn.roundTrip(ctx, deadline, p, rs, c.opts.MaxReplyBytes)
	if err != nil {
		// Sent is false: the caller's commands were not sent.
		return c.ioError(ctx, "handshake "+op, false, true, err)
	}
	for i, name := range names {
		e, _ := rs.At(i).Err().(*Error)
		switch {
		case e == nil:
		case name == "CLIENT SETNAME" && e.Prefix != "NOAUTH":
			// Only cosmetic; some Redis-compatible servers lack it.
			c.log.Debug("CLIENT SETNAME rejected", "err", e)
		case e.Prefix == "NOAUTH":
			return &ConnError{Op: "handshake", Addr: c.cfg.Addr,
				Err: fmt.Errorf("redis requires a password, give it in the URL (redis://:PASSWORD@host): %s", e)}
		default:
			// The text only: errors.As(err, **Error) is kept for replies
			// to the caller's own commands.
			return &ConnError{Op: "handshake", Addr: c.cfg.Addr, Err: fmt.Errorf("%s rejected: %s", name, e)}
		}
	}
	return nil
}

// Conn is one connection taken out of the pool, for command sequences
// that need the same connection (WATCH ... MULTI ... EXEC). Not safe for
// concurrent use. Close returns it to the pool.
//
// On a Redis Cluster a Conn binds to the master of the first key it is
// given (its first call); a later command whose key another node serves
// fails without being sent, with an error that IsRedirect reports, and
// MOVED/ASK/TRYAGAIN replies are returned as replies: the caller takes a
// new Conn.
type Conn struct {
	c    *Client // for a cluster Conn: the node's pool once bound
	cn   *conn
	used bool

	cl      *cluster // set for a cluster Conn
	unbound bool     // a cluster Conn before its first call
	// askSlot >= 0: the Conn followed an ASK for this slot to the node
	// importing it, and sends ASKING before each command (conn_ask.go).
	askSlot int
	// owed: the reply counts of pipelines sent with Send and not yet
	// received, oldest first.
	owed []int
}

// Conn takes a connection out of the pool until Conn.Close.
func (c *Client) Conn(ctx context.Context) (*Conn, error) {
	if c.cl != nil {
		if c.isClosed() {
			return nil, ErrClosed
		}
		return &Conn{c: c, cl: c.cl, unbound: true, askSlot: -1}, nil
	}
	cn, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, cn: cn, askSlot: -1}, nil
}

var errConnClosed = errors.New("resp: Conn used after Close")

func (pc *Conn) usable() error {
	switch {
	case pc.cn == nil:
		return errConnClosed
	case pc.cn.broken:
		return &ConnError{Op: "send", Addr: pc.c.cfg.Addr,
			Err: errors.New("connection broken by an earlier error; take a new Conn")}
	}
	return nil
}

// errOwed: a call that reads its own replies while Send's are still due
// would read theirs.
var errOwed = errors.New("resp: Conn has pipelines sent and not received")

// Exec is Client.Exec on this connection.
func (pc *Conn) Exec(ctx context.Context, p *Pipeline) (*Replies, error) {
	if len(pc.owed) > 0 {
		return nil, errOwed
	}
	first := pc.unbound
	if err := pc.prepare(ctx, p); err != nil {
		return nil, err
	}
	pc.used = true
	if pc.askSlot >= 0 {
		return pc.execAsking(ctx, p)
	}
	rs, err := pc.c.exec(ctx, pc.cn, p)
	if err == nil && pc.cl != nil {
		pc.cl.noteRedirects(rs, pc.c.cfg.Addr)
		if first {
			if slot, addr, ok := allAsk(rs, pc.c.cfg.Addr); ok {
				rs.Release()
				return pc.followAsk(ctx, p, slot, addr)
			}
		}
	}
	return rs, err
}

// prepare checks the Conn can run p: a cluster Conn binds to its node on
// its first call, and refuses keys of other nodes afterwards.
func (pc *Conn) prepare(ctx context.Context, p *Pipeline) error {
	if pc.unbound {
		n, err := pc.cl.bindConn(ctx, p)
		if err != nil {
			return err
		}
		cn, err := n.get(ctx)
		if err != nil {
			return err
		}
		pc.c, pc.cn, pc.unbound = n, cn, false
	}
	if err := pc.usable(); err != nil {
		return err
	}
	if pc.askSlot >= 0 {
		return checkAskSlot(p, pc.askSlot)
	}
	if pc.cl != nil {
		return pc.cl.checkConn(ctx, pc.c, p)
	}
	return nil
}

// Send writes pipelines without reading their replies, in one write,
// for a caller that keeps pipelines in flight one behind the other on
// one connection (a partition's append rounds): Redis runs each while the
// next is on its way. Receive reads the replies of the oldest pipeline
// sent; they come in the order sent. A cluster Conn sends only to the
// node it is bound to and does not follow ASK here: redirects come back
// as replies. Exec and Do refuse to run while replies are owed, and
// Release and Close drop a connection that still owes some.
func (pc *Conn) Send(ctx context.Context, ps ...*Pipeline) error {
	if pc.askSlot >= 0 {
		return errors.New("resp: Send on a Conn that follows a slot migration (ASK)")
	}
	bufs := make(net.Buffers, 0, len(ps))
	for _, p := range ps {
		if err := p.Err(); err != nil {
			return err
		}
		if err := pc.prepare(ctx, p); err != nil {
			return err
		}
		if p.n > 0 {
			bufs = append(bufs, p.buf)
		}
	}
	pc.used = true
	if len(bufs) == 0 {
		for range ps {
			pc.owed = append(pc.owed, 0)
		}
		return nil
	}
	cn := pc.cn
	if err := ctx.Err(); err != nil {
		return &ConnError{Op: "send", Addr: pc.c.cfg.Addr, Err: err}
	}
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(pc.c.opts.Timeout)
	}
	if err := cn.nc.SetWriteDeadline(deadline); err != nil {
		cn.broken = true
		return pc.c.ioError(ctx, "set deadline", false, hasDeadline, err)
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, cn.stop)
	}
	n, err := bufs.WriteTo(cn.nc)
	if stop != nil && !stop() {
		cn.broken = true
	}
	if err != nil {
		cn.broken = true
		return pc.c.ioError(ctx, "write", n > 0, hasDeadline, err)
	}
	for _, p := range ps {
		pc.owed = append(pc.owed, p.n)
	}
	return nil
}

// Receive reads the replies of the oldest pipeline sent with Send.
func (pc *Conn) Receive(ctx context.Context) (*Replies, error) {
	if len(pc.owed) == 0 {
		return nil, errors.New("resp: Receive without a pipeline sent")
	}
	if err := pc.usable(); err != nil {
		return nil, err
	}
	want := pc.owed[0]
	pc.owed = pc.owed[1:]
	rs := pc.c.getReplies()
	if want == 0 {
		return rs, nil
	}
	cn := pc.cn
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(pc.c.opts.Timeout)
	}
	if err := cn.nc.SetReadDeadline(deadline); err != nil {
		cn.broken = true
		rs.Release()
		return nil, pc.c.ioError(ctx, "set deadline", true, hasDeadline, err)
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, cn.stop)
	}
	_, err := readReplies(cn.nc, rs, want, pc.c.opts.MaxReplyBytes, &cn.carry, false)
	if stop != nil && !stop() {
		cn.broken = true
	}
	if err != nil {
		cn.broken = true
		rs.Release()
		return nil, pc.c.ioError(ctx, "read", true, hasDeadline, err)
	}
	if pc.cl != nil {
		pc.cl.noteRedirects(rs, pc.c.cfg.Addr)
	}
	return rs, nil
}

// settled marks a connection that still owes replies (or holds bytes of
// them) as not reusable: its next user would read them.
func (pc *Conn) settled(cn *conn) {
	if len(pc.owed) > 0 || len(cn.carry) > 0 {
		cn.broken = true
	}
	pc.owed = pc.owed[:0]
}

// Do is Client.Do on this connection.
func (pc *Conn) Do(ctx context.Context, args ...any) (Reply, error) {
	p := pc.c.pipes.Get().(*Pipeline)
	p.Cmd(args...)
	rs, err := pc.Exec(ctx, p)
	pc.c.putPipeline(p)
	return single(rs, err)
}

// Release returns the connection to the pool as it is, for a caller whose
// last command was an EXEC (which ends its MULTI and its WATCHes), so that
// Close's clean-up round trip is not needed.
func (pc *Conn) Release() {
	pc.unbound = false
	cn := pc.cn
	if cn == nil {
		return
	}
	pc.cn = nil
	pc.settled(cn)
	pc.c.put(cn)
}

// Close returns the connection to the pool. A used connection is first
// cleared of any open MULTI and WATCHed keys, which would otherwise leak
// into its next user's transactions.
func (pc *Conn) Close() error {
	pc.unbound = false
	cn := pc.cn
	if cn == nil {
		return nil
	}
	pc.cn = nil
	pc.settled(cn)
	if pc.used && !cn.broken {
		// DISCARD ends a MULTI (and unwatches); outside one it is an
		// error reply, and UNWATCH does the job.
		p := pc.c.pipes.Get().(*Pipeline)
		p.Cmd("DISCARD")
		p.Cmd("UNWATCH")
		rs, err := pc.c.exec(context.Background(), cn, p)
		pc.c.putPipeline(p)
		if err == nil {
			rs.Release()
		}
	}
	pc.c.put(cn)
	return nil
}
