// Package kafkawire is korvet's Kafka protocol server: framing, request
// headers and one file per Kafka API. Requests are decoded with kmsg and
// answered by calling the engine; this package never talks to Redis.
package kafkawire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/kafkawire/records"
)

// Options configure a Server.
type Options struct {
	// MaxRequestBytes bounds one request frame; a larger frame closes the
	// connection. Default 100 MiB (Kafka's socket.request.max.bytes).
	MaxRequestBytes int32
	// AdvertisedHost and AdvertisedPort are what Metadata tells clients
	// of Serve's listener (ServeListeners takes them per Listener).
	AdvertisedHost string
	AdvertisedPort int32
	// NodeID is this broker's id. Default 0.
	NodeID int32
	// MaxInFlight bounds the requests one connection may have in flight:
	// beyond it korvet stops reading from that connection. Default 64.
	MaxInFlight int
	// MaxInFlightBytes bounds the fetch response bytes one connection may
	// have reserved and not yet written: a fetch reserves what it may
	// return (at most maxFetchResponseBytes) before it is read, and
	// beyond the bound korvet stops reading from that connection until
	// the client takes its responses. A fetch larger than the bound still
	// runs when nothing else is reserved. Default 64 MiB.
	MaxInFlightBytes int64
	// MaxConnections bounds concurrent connections; 0 means 10000.
	MaxConnections int
	// MaxConnectionsPerIP bounds the concurrent connections from one
	// client IP, so one host cannot take every slot; 0 means 1000.
	MaxConnectionsPerIP int
	// SASLAuthTimeout is how long a connection to a SASL listener may take
	// to authenticate before it is closed; 0 means 10s.
	SASLAuthTimeout time.Duration
	// ConnectionsMaxIdle closes a connection that has sent nothing and has
	// nothing in flight for this long (Kafka's connections.max.idle.ms);
	// 0 means 10 minutes.
	ConnectionsMaxIdle time.Duration
	// MaxProduceDecompressedBytes bounds what the record batches of one
	// produce request may decompress to, all partitions together; 0
	// means 64 MiB.
	MaxProduceDecompressedBytes int
	// Auth holds users and ACLs. SASL listeners and ACLs need it; with it
	// the SCRAM user APIs are served.
	Auth *auth.Store
	// ACLs turns authorization on: requests are checked against Auth's
	// ACLs, except those of SuperUsers ("User:name").
	ACLs       bool
	SuperUsers []string
	// AllowPlainWithoutTLS offers SASL PLAIN on listeners without TLS,
	// where passwords would cross the network in the clear.
	AllowPlainWithoutTLS bool
	// Metrics, when set, counts requests, latency and bytes per API.
	Metrics *Metrics
	Logger  *slog.Logger
}

// Server serves the Kafka protocol for an engine.
type Server struct {
	eng    *engine.Engine
	opts   Options
	log    *slog.Logger
	policy auth.Policy // who may do what: Options.Auth, ACLs, SuperUsers

	apis     map[int16]apiDef
	decoders sync.Pool // *batchDecoder
	encoders sync.Pool // *records.Encoder

	mu    sync.Mutex
	conns map[*conn]struct{}
	perIP map[string]int // open connections per client IP
	wg    sync.WaitGroup

	// quit is closed when Serve stops accepting, so that calls parked on
	// a consumer group (JoinGroup, SyncGroup) answer at once rather than
	// hold up the drain.
	quit     chan struct{}
	quitOnce sync.Once

	// Connected counts open client connections (for the status page).
	Connected atomic.Int64
}

// NewServer returns a Server for eng.
func NewServer(eng *engine.Engine, opts Options) *Server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 100 << 20
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.MaxInFlightBytes <= 0 {
		opts.MaxInFlightBytes = 64 << 20
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = 10000
	}
	if opts.MaxConnectionsPerIP <= 0 {
		opts.MaxConnectionsPerIP = 1000
	}
	if opts.SASLAuthTimeout <= 0 {
		opts.SASLAuthTimeout = 10 * time.Second
	}
	if opts.ConnectionsMaxIdle <= 0 {
		opts.ConnectionsMaxIdle = 10 * time.Minute
	}
	if opts.MaxProduceDecompressedBytes <= 0 {
		opts.MaxProduceDecompressedBytes = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{eng: eng, opts: opts, log: opts.Logger, conns: make(map[*conn]struct{}), perIP: make(map[string]int), apis: apiTable(), quit: make(chan struct{}),
		policy: auth.Policy{Store: opts.Auth, ACLs: opts.ACLs, SuperUsers: opts.SuperUsers}}
	s.encoders.New = func() any { return new(records.Encoder) }
	s.decoders.New = func() any { return new(batchDecoder) }
	return s
}

// Serve accepts plain connections on ln, advertised as
// Options.AdvertisedHost and AdvertisedPort; see ServeListeners.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	return s.ServeListeners(ctx, drain, Listener{Listener: ln, AdvertisedHost: s.opts.AdvertisedHost, AdvertisedPort: s.opts.AdvertisedPort})
}

// ServeListeners accepts connections on every listener until ctx is
// cancelled or one of them fails, then stops reading new requests, lets
// in-flight ones finish (bounded by drain) and returns.
func (s *Server) ServeListeners(ctx context.Context, drain time.Duration, ls ...Listener) error {
	served, err := s.listeners(ls)
	if err != nil {
		for _, l := range ls {
			if l.Listener != nil {
				l.Close()
			}
		}
		return err
	}
	actx, stopAccepting := context.WithCancel(ctx)
	defer stopAccepting()
	errs := make(chan error, len(served))
	for _, l := range served {
		stop := context.AfterFunc(actx, func() { l.Close() })
		defer stop()
		go func() {
			err := s.accept(ctx, actx, l)
			stopAccepting()
			errs <- err
		}()
	}
	for range served {
		if aerr := <-errs; aerr != nil && err == nil {
			err = aerr
		}
	}
	s.quitOnce.Do(func() { close(s.quit) })
	// Stop reading: each connection finishes what it has read.
	s.mu.Lock()
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		s.log.Warn("drain timed out; closing connections")
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	return err
}

// accept serves l's connections until actx ends.
func (s *Server) accept(ctx, actx context.Context, l *listener) error {
	for {
		nc, err := l.Accept()
		if err != nil {
			if actx.Err() == nil {
				return fmt.Errorf("kafka listener %s: %w", l.Addr(), err)
			}
			return nil
		}
		ip := remoteIP(nc)
		if why := s.admitConn(ip); why != "" {
			s.log.Warn("connection refused: "+why, "remote", nc.RemoteAddr(), "max_connections", s.opts.MaxConnections, "max_connections_per_ip", s.opts.MaxConnectionsPerIP)
			nc.Close()
			continue
		}
		if l.TLS != nil {
			nc = tls.Server(nc, l.TLS) // the handshake runs in conn.start
		}
		c := s.newConn(nc, l)
		c.host = ip
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			if s.perIP[ip]--; s.perIP[ip] <= 0 {
				delete(s.perIP, ip)
			}
			s.mu.Unlock()
			s.Connected.Add(-1)
		}()
	}
}

// admitConn counts a new connection from ip against max_connections and
// max_connections_per_ip, here at accept so that a burst cannot overshoot
// them; it returns why the connection is refused, or "" when it is taken.
func (s *Server) admitConn(ip string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Connected.Load() >= int64(s.opts.MaxConnections) {
		return "max_connections reached"
	}
	if s.perIP[ip] >= s.opts.MaxConnectionsPerIP {
		return "max_connections_per_ip reached"
	}
	s.perIP[ip]++
	s.Connected.Add(1)
	return ""
}

// remoteIP is the address a connection comes from, without its port.
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

// slot is one request's place in its connection's response order.
type slot struct {
	done   chan struct{}
	frame  []byte // the encoded response frame, or nil for no response
	closer bool   // close the connection instead of answering
	// reserved is what the request holds of its connection's byte
	// budget; the writer releases it once the frame is written.
	reserved int64
}

// byteBudget bounds the response bytes a connection has reserved but not
// yet written. The reader takes reservations in request order, so a wait
// only ever depends on earlier responses, which the writer sends and
// releases whatever later requests do: no deadlock.
type byteBudget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	freed chan struct{} // closed and replaced on every release
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire reserves n bytes, waiting while earlier requests hold too much.
// A reservation larger than the whole budget goes through once nothing
// else is held. It returns false when ctx ends first.
func (b *byteBudget) acquire(ctx context.Context, n int64) bool {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// release gives n reserved bytes back.
func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

type conn struct {
	s       *Server
	nc      net.Conn
	l       *listener // the listener it came in on
	out     chan *slot
	budget  *byteBudget // response and produce bytes not yet let go
	reading atomic.Bool
	// inflight counts requests read and not yet answered; lastActive is
	// when a request's bytes last arrived or a response left (unix
	// nanoseconds). Together they say whether the connection is idle.
	inflight   atomic.Int64
	lastActive atomic.Int64
	idle       *time.Timer // closes the connection once idle too long
	authTimer  *time.Timer // closes it if SASL authentication takes too long
	authed     atomic.Bool // SASL authentication done (for authTimer)
	ended      atomic.Bool // serve has returned: timers do nothing more
	// decoded is what the current produce request's records decompressed
	// to; the in-order half sets it, dispatch reserves it.
	decoded int64
	// clientID is the last request's client id, for logs.
	clientID string

	// Who is on the other end, for authorization. Set before the first
	// request that needs it and not changed after, so handlers read them
	// without locks.
	principal string // "User:name"
	super     bool   // principal is a super user
	host      string // remote IP
	sasl      saslState
	// hangup: close the connection once the current request is answered
	// (failed authentication). Set in a handler's in-order part.
	hangup bool
	// oldProduceLogged: a refused Produce v0-2 has been logged (dispatch).
	oldProduceLogged bool
}

func (s *Server) newConn(nc net.Conn, l *listener) *conn {
	c := &conn{s: s, nc: nc, l: l, out: make(chan *slot, s.opts.MaxInFlight), budget: newByteBudget(s.opts.MaxInFlightBytes)}
	c.reading.Store(true)
	c.touch()
	return c
}

// touch marks the connection active now.
func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// enqueue puts a request's slot in the response order.
func (c *conn) enqueue(sl *slot) {
	c.inflight.Add(1)
	c.out <- sl
}

// startTimers arms the idle timeout and, on a SASL listener, the
// authentication deadline. Timers rather than read deadlines: a deadline
// would also fire on a client waiting for a slow answer (a long poll, a
// rebalance), which is not idle.
func (c *conn) startTimers() {
	idle := c.s.opts.ConnectionsMaxIdle
	// Created stopped and then armed, so the callback never sees the
	// field unset.
	c.idle = time.AfterFunc(time.Hour, c.checkIdle)
	c.idle.Stop()
	c.idle.Reset(idle)
	if len(c.l.mechs) > 0 {
		limit := c.s.opts.SASLAuthTimeout
		c.authTimer = time.AfterFunc(limit, func() {
			if !c.authed.Load() {
				c.s.log.Warn("closing connection: SASL authentication not completed in time", "remote", c.nc.RemoteAddr(), "timeout", limit)
				c.nc.Close()
			}
		})
	}
}

func (c *conn) stopTimers() {
	c.ended.Store(true)
	c.idle.Stop()
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
}

// checkIdle closes the connection when nothing has arrived or left for
// connections_max_idle and no request is in flight; otherwise it looks
// again when that could first be the case.
func (c *conn) checkIdle() {
	idle := c.s.opts.ConnectionsMaxIdle
	since := time.Since(time.Unix(0, c.lastActive.Load()))
	switch {
	case c.ended.Load():
	case c.inflight.Load() > 0:
		c.idle.Reset(idle)
	case since < idle:
		c.idle.Reset(idle - since)
	default:
		c.s.log.Info("closing idle connection", "remote", c.nc.RemoteAddr(), "idle", since.Round(time.Millisecond))
		c.nc.Close()
	}
}

func (c *conn) stopReading() {
	c.reading.Store(false)
	// Unblock a pending read; the reader sees reading==false and stops.
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) serve(parent context.Context) {
	c.startTimers()
	defer c.stopTimers()
	// The connection's context outlives the server's: in-flight requests
	// finish during a drain. It ends when the connection does.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	if !c.start(ctx) {
		c.nc.Close()
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
		cancel()
	}()
	c.readLoop(ctx)
	close(c.out)
	<-writerDone
	c.nc.Close()
}

// readBufSize is the read buffer of a connection, allocated once its first
// bytes arrive: a silent connection costs no buffer. Frames larger than
// it are read straight into their own slice.
const readBufSize = 16 << 10

func (c *conn) readLoop(ctx context.Context) {
	var br *bufio.Reader
	var hdr [4]byte
	for c.reading.Load() {
		var err error
		if br == nil {
			// No buffer until the client says something.
			_, err = io.ReadFull(c.nc, hdr[:])
			br = bufio.NewReaderSize(c.nc, readBufSize)
		} else {
			_, err = io.ReadFull(br, hdr[:])
		}
		if err != nil {
			if c.reading.Load() && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("connection read failed", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		c.touch()
		size := int32(binary.BigEndian.Uint32(hdr[:]))
		if lo, hi := c.frameLimits(); size < lo || size > hi {
			c.s.log.Warn("closing connection: bad request size", "remote", c.nc.RemoteAddr(), "size", size, "max", hi)
			return
		}
		body, err := readFrame(br, int(size), c.touch)
		if err != nil {
			c.s.log.Debug("connection read failed mid-request", "remote", c.nc.RemoteAddr(), "err", err)
			return
		}
		sl := &slot{done: make(chan struct{})}
		if c.sasl.raw {
			if !c.rawSaslToken(ctx, body, sl) {
				return
			}
			continue
		}
		if !c.dispatch(ctx, body, sl) {
			return
		}
	}
}

// frameChunk is the first allocation for a frame larger than the read
// buffer; it then doubles as bytes arrive.
const frameChunk = 64 << 10

// readFrame reads a frame body of size bytes. Memory follows the bytes
// that have arrived, not the size the client announced: a client that
// announces 100 MB and sends nothing costs nothing, one that sends half
// costs about that. touch is called whenever bytes arrive.
func readFrame(br *bufio.Reader, size int, touch func()) ([]byte, error) {
	if size <= br.Size() {
		body := make([]byte, size)
		_, err := io.ReadFull(br, body)
		return body, err
	}
	var body []byte
	for len(body) < size {
		if len(body) == cap(body) {
			// Wait for bytes before making room for them.
			if _, err := br.Peek(1); err != nil {
				return nil, unexpectedEOF(err)
			}
			body = slices.Grow(body, min(size-len(body), max(len(body), frameChunk)))
		}
		n, err := br.Read(body[len(body):min(cap(body), size)])
		body = body[:len(body)+n]
		if n > 0 {
			touch()
		}
		if err != nil && len(body) < size {
			return nil, unexpectedEOF(err)
		}
	}
	return body, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// dispatch decodes one request and starts answering it. It returns false
// when the connection must be closed.
func (c *conn) dispatch(ctx context.Context, body []byte, sl *slot) bool {
	h, req, err := parseRequest(body)
	if err != nil {
		c.s.log.Warn("closing connection: malformed request", "remote", c.nc.RemoteAddr(), "client", c.clientID, "err", err)
		return false
	}
	c.clientID = h.clientID
	api, ok := c.api(h.key)
	if !ok || h.version < api.min || h.version > api.max {
		if h.key == apiVersionsKey {
			// Clients probe with versions newer than ours and expect a
			// v0 answer listing what we support (KIP-511).
			r := c.apiVersionsResponse(0)
			r.ErrorCode = errUnsupportedVersion
			sl.frame = encodeResponse(h.correlation, false, r)
			close(sl.done)
			c.enqueue(sl)
			return true
		}
		c.s.log.Warn("closing connection: unsupported request", "remote", c.nc.RemoteAddr(), "client", c.clientID, "api", kmsg.NameForKey(h.key), "key", h.key, "version", h.version)
		return false
	}
	if req == nil {
		c.s.log.Warn("closing connection: request failed to decode", "remote", c.nc.RemoteAddr(), "api", kmsg.NameForKey(h.key), "version", h.version)
		return false
	}
	if !c.admit(h.key) {
		c.s.log.Warn("closing connection: request before SASL authentication", "remote", c.nc.RemoteAddr(), "client", c.clientID, "api", kmsg.NameForKey(h.key))
		return false
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Version < produceServedFrom {
		// Advertised, never served (see apiTable): refused before
		// authorization and before its records are looked at, and the
		// connection stays open. acks=0 gets no answer; observe gets the
		// refusal all the same, so that nothing counts as produced.
		observe := c.s.opts.Metrics.started(h.key, req, len(body)+4)
		r := c.refuseOldProduce(pr)
		if pr.Acks != 0 {
			sl.frame = encodeResponse(h.correlation, h.flexibleResponse(), r)
		}
		close(sl.done)
		observe(r, len(sl.frame))
		c.enqueue(sl)
		return true
	}
	// A fetch reserves what it may return before it starts: a client that
	// does not read its responses stops being read from instead of piling
	// them up in korvet's memory.
	if fr, ok := req.(*kmsg.FetchRequest); ok {
		n := int64(fetchLimit(fr))
		if !c.budget.acquire(ctx, n) {
			return false
		}
		sl.reserved = n
	}
	// The slot goes into the queue before any work starts, so responses
	// leave in request order however long each takes.
	observe := c.s.opts.Metrics.started(h.key, req, len(body)+4)
	c.enqueue(sl)
	finish, ok := c.inOrder(ctx, api.handle, req)
	if !ok {
		sl.closer = true
		close(sl.done)
		observe(nil, 0)
		return false
	}
	if _, ok := req.(*kmsg.ProduceRequest); ok {
		// A produce holds its request and decompressed records until
		// Redis has them: counted against the connection's budget, so a
		// client pipelining big produces stops being read from instead of
		// piling them up in korvet's memory.
		n := int64(len(body)) + c.decoded
		c.decoded = 0
		if !c.budget.acquire(ctx, n) {
			sl.closer = true
			close(sl.done)
			observe(nil, 0)
			return false
		}
		sl.reserved = n
	}
	go func() {
		defer close(sl.done)
		var resp kmsg.Response
		defer func() {
			if r := recover(); r != nil {
				c.s.log.Error("handler panic; closing connection", "api", kmsg.NameForKey(h.key), "remote", c.nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
				sl.closer = true
			}
			// Keep only what the frame needs of the reservation.
			if extra := sl.reserved - int64(len(sl.frame)); extra > 0 {
				c.budget.release(extra)
				sl.reserved -= extra
			}
			observe(resp, len(sl.frame))
		}()
		resp = finish()
		if resp == nil {
			return // acks=0 produce: no answer
		}
		sl.frame = encodeResponse(h.correlation, h.flexibleResponse(), resp)
	}()
	return !c.hangup
}

// inOrder runs the in-order half of a handler (which for a produce decodes
// and queues the record batches). A panic there closes this connection,
// not the process: ok is false.
func (c *conn) inOrder(ctx context.Context, h handler, req kmsg.Request) (finish func() kmsg.Response, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("handler panic; closing connection", "api", kmsg.NameForKey(req.Key()), "remote", c.nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			finish, ok = nil, false
		}
	}()
	return c.handle(ctx, h, req), true
}

func (c *conn) writeLoop() {
	// The write buffer comes with the first response: a silent connection
	// costs none.
	var bw *bufio.Writer
	broken := false
	for sl := range c.out {
		<-sl.done
		if bw == nil {
			bw = bufio.NewWriterSize(c.nc, 64<<10)
		}
		ok := c.writeSlot(bw, sl, broken)
		c.budget.release(sl.reserved)
		c.inflight.Add(-1)
		c.touch()
		if !ok {
			broken = true
			continue
		}
		if len(c.out) == 0 {
			if err := bw.Flush(); err != nil {
				broken = true
				c.nc.Close()
			}
		}
	}
	if !broken && bw != nil {
		_ = bw.Flush()
	}
}

// writeSlot writes one slot's frame; it returns false when the connection
// is (or now is) broken.
func (c *conn) writeSlot(bw *bufio.Writer, sl *slot, broken bool) bool {
	if broken {
		return false
	}
	if sl.closer {
		c.nc.Close()
		return false
	}
	if sl.frame != nil {
		if _, err := bw.Write(sl.frame); err != nil {
			c.nc.Close()
			return false
		}
	}
	return true
}

// header is a decoded request header.
type header struct {
	key, version int16
	correlation  int32
	clientID     string
	flexible     bool
}

// flexibleResponse says whether the response header carries tagged
// fields; ApiVersions never does, so that any client can read it.
func (h header) flexibleResponse() bool { return h.flexible && h.key != apiVersionsKey }

// parseRequest decodes the request header and, when the API and version
// are known to kmsg, the body. req is nil when kmsg does not know them.
func parseRequest(b []byte) (header, kmsg.Request, error) {
	var h header
	if len(b) < 10 {
		return h, nil, fmt.Errorf("request of %d bytes is shorter than a header", len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(b[4:]))
	idLen := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if idLen > 0 {
		if int(idLen) > len(b) {
			return h, nil, fmt.Errorf("client id length %d overruns request", idLen)
		}
		h.clientID = string(b[:idLen])
		b = b[idLen:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil || h.version < 0 || h.version > req.MaxVersion() {
		return h, nil, nil
	}
	req.SetVersion(h.version)
	h.flexible = req.IsFlexible()
	if h.flexible {
		rest, err := skipTags(b)
		if err != nil {
			return h, nil, fmt.Errorf("request header tags: %w", err)
		}
		b = rest
	}
	if err := req.ReadFrom(b); err != nil {
		return h, nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[w:]
	for i := uint64(0); i < n; i++ {
		_, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// encodeResponse frames a response: size, correlation id, an empty tag
// section for flexible headers, then the body.
func encodeResponse(correlation int32, flexible bool, r kmsg.Response) []byte {
	buf := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(buf[4:], uint32(correlation))
	if flexible {
		buf = append(buf, 0)
	}
	buf = r.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}
