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
	// Features (KIP-584, tagged fields of v3+): transaction.version 2 is
	// KIP-890 part 2, on which clients skip AddPartitionsToTxn and
	// AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5 add
	// implicitly) and EndTxn v5 bumps the epoch. The finalized level never
	// changes, so neither does its epoch.
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = txnVersionFeature, 0, txnVersion
	r.SupportedFeatures = append(r.SupportedFeatures, sf)
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = txnVersionFeature, txnVersion, txnVersion
	r.FinalizedFeatures = append(r.FinalizedFeatures, ff)
	r.FinalizedFeaturesEpoch = 1
	return r
}

// The transaction.version feature korvet runs at (KIP-890 part 2).
const (
	txnVersionFeature = "transaction.version"
	txnVersion        = 2
)

// handleApiVersions lists what korvet serves. From v5 (KIP-1242) a client
// may name the cluster and node it means to reach, both or neither: a
// connection that reached another one (a restarted korvet on a fresh
// Redis, another korvet behind the same address) is answered
// REBOOTSTRAP_REQUIRED, on which the client rediscovers the cluster from
// its seeds instead of talking to the wrong one.
func handleApiVersions(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ApiVersionsRequest)
	var r *kmsg.ApiVersionsResponse
	switch named := req.NodeID != -1; {
	case req.Version < 5 || req.ClusterID == nil && !named:
		r = c.apiVersionsResponse(req.Version)
	case req.ClusterID == nil || !named:
		r = req.ResponseKind().(*kmsg.ApiVersionsResponse)
		r.ErrorCode = kerr.InvalidRequest.Code
	case *req.ClusterID != c.s.eng.ClusterID() || req.NodeID != c.s.opts.NodeID:
		c.s.log.Info("ApiVersions: client expected another cluster or node; asking it to rebootstrap",
			"remote", c.nc.RemoteAddr(), "client", c.clientID, "node_id", req.NodeID)
		r = req.ResponseKind().(*kmsg.ApiVersionsResponse)
		r.ErrorCode = kerr.RebootstrapRequired.Code
	default:
		r = c.apiVersionsResponse(req.Version)
	}
	return func() kmsg.Response { return r }
}
