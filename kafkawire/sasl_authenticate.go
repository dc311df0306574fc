package kafkawire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleSaslAuthenticate(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.sasl.mech == "" || c.sasl.raw || c.sasl.done {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate is only valid once, after a SaslHandshake v1")
		c.hangup = true
		return func() kmsg.Response { return resp }
	}
	out, _, err := c.saslStep(ctx, req.SASLAuthBytes)
	switch {
	case errors.Is(err, auth.ErrAuthFailed):
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid credentials with SASL mechanism " + c.sasl.mech)
		c.hangup = true
		return func() kmsg.Response {
			sleepCtx(ctx, authFailDelay)
			return resp
		}
	case err != nil:
		// The user store did not answer: close without an answer, so
		// that the client retries rather than giving up on bad
		// credentials.
		c.hangup = true
		return func() kmsg.Response { return nil }
	}
	resp.SASLAuthBytes = out
	return func() kmsg.Response { return resp }
}
