package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var errUnsupportedVersion = kerr.UnsupportedVersion.Code

// apiVersionsResponse lists, in key order, the APIs of apiTable this
// connection is offered.
func (c *conn) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	s := c.s
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	keys := make([]kmsg.Key, 0, len(s.apis))
	for k := range s.apis {
		if c.offers(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a := s.apis[k]
		r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.Int16(), MinVersion: a.min, MaxVersion: a.max})
	}
	return r
}

func handleApiVersions(_ context.Context, c *conn, req kmsg.Request) func() kmsg.Response {
	r := c.apiVersionsResponse(req.GetVersion())
	return func() kmsg.Response { return r }
}
