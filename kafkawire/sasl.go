package kafkawire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// SASL mechanisms korvet offers.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

const (
	// preAuthMaxBytes bounds frames before authentication, as Kafka's
	// sasl.server.max.receive.size does: an unknown client cannot make
	// korvet allocate much.
	preAuthMaxBytes = 512 << 10

	// authFailDelay holds back the answer to a failed authentication
	// (Kafka's connection.failed.authentication.delay.ms), which slows
	// password guessing; the connection is closed after it.
	authFailDelay = 100 * time.Millisecond
)

// ValidMechanism reports whether korvet offers the SASL mechanism name.
func ValidMechanism(name string) bool {
	return name == MechPlain || name == MechScramSHA256 || name == MechScramSHA512
}

// saslState is a connection's progress through SASL. Only the read
// goroutine touches it: SASL requests do their work in the in-order part
// of their handler, so the next frame is read knowing the outcome.
type saslState struct {
	mech  string      // chosen by SaslHandshake
	raw   bool        // handshake v0: tokens come as bare frames
	scram *auth.Scram // for SCRAM mechanisms
	done  bool        // authenticated
}

// needsAuth: on a SASL listener, nothing but ApiVersions and SASL is
// served before authentication.
func (c *conn) needsAuth() bool { return len(c.l.mechs) > 0 && !c.sasl.done }

// admit says whether a request may be served now. Kafka closes a
// connection that sends anything else before authenticating; so does
// korvet.
func (c *conn) admit(key kmsg.Key) bool {
	return !c.needsAuth() || key == kmsg.ApiVersions || key == kmsg.SASLHandshake || key == kmsg.SASLAuthenticate
}

// frameLimits bounds the size of the next frame.
func (c *conn) frameLimits() (lo, hi int32) {
	hi = c.s.opts.MaxRequestBytes
	if !c.needsAuth() {
		return 8, hi
	}
	hi = min(hi, preAuthMaxBytes)
	if c.sasl.raw {
		return 1, hi // a bare token has no request header
	}
	return 8, hi
}

// rawSaslToken answers a token sent bare after a v0 SaslHandshake, with a
// bare token. It returns false when the connection must close: v0 has no
// way to say why authentication failed.
func (c *conn) rawSaslToken(ctx context.Context, token []byte, sl *slot) bool {
	out, done, err := c.saslStep(ctx, token)
	if err != nil {
		if errors.Is(err, auth.ErrAuthFailed) {
			sleepCtx(ctx, authFailDelay)
		}
		return false
	}
	if done {
		c.sasl.raw = false
	}
	sl.frame = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(out)), uint32(len(out)))
	sl.frame = append(sl.frame, out...)
	close(sl.done)
	c.enqueue(sl)
	return true
}

// saslStep feeds the client's token to the chosen mechanism and returns
// the server's. On the last step the connection becomes the user's.
func (c *conn) saslStep(ctx context.Context, token []byte) (out []byte, done bool, err error) {
	var user string
	if c.sasl.scram != nil {
		out, done, err = c.sasl.scram.Step(ctx, token)
		user = c.sasl.scram.User()
	} else {
		user, err = c.checkPlain(ctx, token)
		out, done = []byte{}, err == nil
	}
	if err != nil {
		c.s.log.Warn("SASL authentication failed", "remote", c.nc.RemoteAddr(), "mechanism", c.sasl.mech, "user", user, "err", err)
		return nil, false, err
	}
	if done {
		c.sasl.done = true
		c.authed.Store(true)
		if c.authTimer != nil {
			c.authTimer.Stop()
		}
		c.setPrincipal("User:" + user)
		c.s.log.Debug("SASL authenticated", "remote", c.nc.RemoteAddr(), "mechanism", c.sasl.mech, "principal", c.principal)
	}
	return out, done, nil
}

// checkPlain verifies a PLAIN token (RFC 4616: authzid NUL user NUL
// password) and returns the user.
func (c *conn) checkPlain(ctx context.Context, token []byte) (string, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", fmt.Errorf("%w: malformed PLAIN message", auth.ErrAuthFailed)
	}
	user := string(parts[1])
	if len(parts[0]) > 0 && string(parts[0]) != user {
		return user, fmt.Errorf("%w: authorization id %q differs from user %q", auth.ErrAuthFailed, parts[0], user)
	}
	return user, c.s.opts.Auth.CheckPassword(ctx, user, string(parts[2]))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
