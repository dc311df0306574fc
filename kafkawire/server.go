// Package kafkawire is korvet's Kafka protocol server: framing, request
// headers and one file per Kafka API. Requests are decoded with kmsg and
// answered by calling the engine; this package never talks to Redis.
//
// Where things are:
//   - server.go: Options, and the Server: accepting connections, draining
//     them on shutdown.
//   - conn.go: one connection: its read and write loops, the order its
//     responses leave in, its timers; budget.go bounds the bytes it holds.
//   - frame.go: frames and request headers in, response frames out.
//   - dispatch.go: one request, from its frame to its response slot.
//   - apis.go: the table of APIs (versions, handler and authorization rule
//     of each) and what a connection is offered.
//   - authorize.go: how the rules run, and what they share.
//   - one file per API, named after it (produce.go, list_offsets.go,
//     describe_configs.go, ...; group_*.go and offset_*.go for consumer
//     groups): its handler, its request checks and its rule. What several
//     share is in group_common.go, acl_common.go and configs.go;
//     error_codes.go turns engine errors into Kafka error codes.
//   - listener.go, tls.go, sasl.go: listeners and their security.
//   - cluster.go: several brokers over one Redis: what a connection is
//     told of the others, the partition leader checks, and the group
//     coordinator check of the group APIs.
//   - metrics.go: Prometheus metrics per API.
//   - batch/: record batches, decoded, decompressed and built.
package kafkawire

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/kafkawire/batch"
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
	// VerifyTxn, when set, checks a transactional batch against the
	// transaction coordinator before it opens a transaction in a
	// partition (the first batch of the producer's transaction there);
	// its error is the partition's answer. nil: the engine's transaction
	// coordinator decides.
	VerifyTxn func(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error
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
	// NoFetchReadAhead turns fetch read-ahead off (fetch_ahead.go).
	NoFetchReadAhead bool
	// FetchReadAheadIdle is how long a read-ahead waits for the fetch it
	// is for before it is dropped; 0 means 1s.
	FetchReadAheadIdle time.Duration
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
	// CheckTxnOffsets, when set, stands in for the engine's transaction
	// coordinator (tests) in deciding whether a TxnOffsetCommit may go
	// ahead: the transaction of txnID is ongoing with producer pid at
	// epoch, and AddOffsetsToTxn added group. A refusal that wraps a
	// *kerr.Error (INVALID_TXN_STATE, PRODUCER_FENCED, ...) is answered
	// with its code. nil: the engine's coordinator decides.
	CheckTxnOffsets func(ctx context.Context, txnID string, pid int64, epoch int16, group string) error
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

	apis     map[kmsg.Key]apiDef
	decoders sync.Pool // *batchDecoder
	encoders sync.Pool // *batch.Encoder
	bufs     bufPool   // fetch answers' batches and frames (bufpool.go)

	mu    sync.Mutex
	conns map[*conn]struct{}
	perIP map[string]int // open connections per client IP
	// localListener is what Local's requests are told of this broker
	// (setLocalListener); nil before ServeListeners.
	localListener *listener
	wg            sync.WaitGroup

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
	if opts.FetchReadAheadIdle <= 0 {
		opts.FetchReadAheadIdle = time.Second
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
	s.encoders.New = func() any { return new(batch.Encoder) }
	s.decoders.New = func() any { return new(batchDecoder) }
	return s
}

// Serve accepts plain connections on ln, advertised as
// Options.AdvertisedHost and AdvertisedPort; see ServeListeners.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	return s.ServeListeners(ctx, drain, Listener{Listener: ln, AdvertisedHost: s.opts.AdvertisedHost, AdvertisedPort: s.opts.AdvertisedPort})
}

// draining reports whether ServeListeners has stopped accepting.
func (s *Server) draining() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
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
	s.setLocalListener(served)
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
