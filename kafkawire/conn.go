package kafkawire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// slot is one request's place in its connection's response order.
type slot struct {
	done   chan struct{}
	frame  []byte // the encoded response frame, or nil for no response
	closer bool   // close the connection instead of answering
	// reserved is what the request holds of its connection's byte
	// budget; the writer releases it once the frame is written.
	reserved int64
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
	answered   atomic.Bool // a response has been written
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
	// readDone is closed when the read loop ends (the client hung up, or
	// a drain): a waiting ShareFetch then stops acquiring records for a
	// client that may never read them.
	readDone chan struct{}
	// ahead holds the fetch read-aheads (fetch_ahead.go).
	ahead aheads
}

func (s *Server) newConn(nc net.Conn, l *listener) *conn {
	c := &conn{s: s, nc: nc, l: l, out: make(chan *slot, s.opts.MaxInFlight), budget: newByteBudget(s.opts.MaxInFlightBytes), readDone: make(chan struct{})}
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
	close(c.readDone)
	close(c.out)
	<-writerDone
	c.dropAheads(true)
	if !c.answered.Load() && c.s.draining() {
		// A drain caught a connection before its first answer (its
		// ApiVersions, say). Clients read a clean close there as a TLS or
		// SASL mismatch and give up (franz-go's ErrFirstReadEOF); a reset
		// is a network error, which they retry on another broker or
		// after the restart.
		resetOnClose(c.nc)
	}
	c.nc.Close()
}

// resetOnClose makes Close send a TCP reset instead of a FIN.
func resetOnClose(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
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
		if sl.frame != nil {
			if ok {
				c.answered.Store(true)
			}
			// Written, or never to be: bufio keeps no reference.
			c.s.bufs.put(sl.frame)
			sl.frame = nil
		}
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
