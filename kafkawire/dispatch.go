package kafkawire

import (
	"context"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dispatch decodes one request and starts answering it. It returns false
// when the connection must be closed.
func (c *conn) dispatch(ctx context.Context, body []byte, sl *slot) bool {
	h, req, err := parseRequest(body)
	if err != nil {
		c.s.log.Warn("closing connection: malformed request", "remote", c.nc.RemoteAddr(), "client", c.clientID, "err", err)
		return false
	}
	c.clientID = h.clientID
	key := kmsg.Key(h.key)
	api, ok := c.api(key)
	if !ok || h.version < api.min || h.version > api.max {
		if key == kmsg.ApiVersions {
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
	if !c.admit(key) {
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
	if n := responseLimit(req); n > 0 {
		if !c.reserve(ctx, n) {
			return false
		}
		sl.reserved = n
	}
	// The slot goes into the queue before any work starts, so responses
	// leave in request order however long each takes.
	observe := c.s.opts.Metrics.started(h.key, req, len(body)+4)
	c.enqueue(sl)
	finish, ok := c.inOrder(ctx, api, req)
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
		if !c.reserve(ctx, n) {
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
			if sl.frame != nil {
				c.s.recycle(resp) // the frame holds a copy
			}
		}()
		resp = finish()
		if resp == nil {
			return // acks=0 produce: no answer
		}
		sl.frame = c.s.encode(h.correlation, h.flexibleResponse(), resp)
	}()
	return !c.hangup
}

// inOrder runs the in-order half of a's handler (which for a produce
// decodes and queues the record batches). A panic there closes this
// connection, not the process: ok is false.
func (c *conn) inOrder(ctx context.Context, a apiDef, req kmsg.Request) (finish func() kmsg.Response, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("handler panic; closing connection", "api", kmsg.NameForKey(req.Key()), "remote", c.nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			finish, ok = nil, false
		}
	}()
	return c.handle(ctx, a, req), true
}
