package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleSaslHandshake(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.l.mechs
	switch {
	case c.sasl.done || c.sasl.mech != "":
		// No re-authentication: korvet gives sessions no lifetime.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.hangup = true
	case !slices.Contains(c.l.mechs, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.s.log.Info("SASL mechanism not offered", "remote", c.nc.RemoteAddr(), "mechanism", req.Mechanism, "offered", c.l.mechs)
	default:
		c.sasl.mech = req.Mechanism
		c.sasl.raw = req.Version == 0
		if m, ok := auth.ParseMechanism(req.Mechanism); ok {
			c.sasl.scram = c.s.opts.Auth.NewScram(m)
		}
	}
	return func() kmsg.Response { return resp }
}
