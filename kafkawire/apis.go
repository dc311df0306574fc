package kafkawire

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire/batch"
)

// handler does the part of a request that must happen in request order
// (such as queueing a produce) and returns the rest, which runs
// concurrently; its response is written in request order.
type handler func(ctx context.Context, c *conn, req kmsg.Request) func() kmsg.Response

type apiDef struct {
	min, max int16
	handle   handler
}

const apiVersionsKey = 18

var errUnsupportedVersion = kerr.UnsupportedVersion.Code

// apiTable lists every API korvet answers, with the versions that work. It
// is what ApiVersions advertises, so nothing may be listed that is not
// served, with one exception: Produce v0-2.
//
// Why the minimums are what they are: librdkafka (kcat, confluent-kafka)
// reads a broker's ranges against the versions its feature table
// (rdkafka_feature.c) needs, and before 2.11.1 (2.0.2 measured) it
// compresses with gzip, snappy or lz4 only if Produce is listed somewhere
// in 0..0 (zstd: 0..7).
// A Produce minimum above 0 made it send those batches uncompressed,
// silently. So, as Kafka 4.0 does (KAFKA-18659), Produce is advertised from
// 0 while v0-2 (pre-0.11 message sets) are answered UNSUPPORTED_VERSION
// (refuseOldProduce). Fetch starts at 4, as in Kafka 4.0: librdkafka needs
// Fetch 4 for MsgVer2 and 10 for ZSTD; the features that need Fetch 1-2
// (MsgVer1, ThrottleTime) are its fallbacks for brokers without MsgVer2,
// and it fetches at the highest version both sides have. Every other API
// starts at 0, so no feature's range can miss it.
func apiTable() map[int16]apiDef {
	return map[int16]apiDef{
		0:  {0, 13, handleProduce}, // v0-2 refused, see above
		1:  {4, 18, handleFetch},
		2:  {0, 11, handleListOffsets},
		3:  {0, 13, handleMetadata},
		18: {0, 5, handleApiVersions},
		19: {0, 7, handleCreateTopics},
		20: {0, 6, handleDeleteTopics},
		22: {0, 5, handleInitProducerID},
		21: {0, 2, handleDeleteRecords},
		23: {0, 4, handleOffsetForLeaderEpoch},
		32: {0, 4, handleDescribeConfigs},
		35: {0, 4, handleDescribeLogDirs},
		60: {0, 1, handleDescribeCluster},
		61: {0, 0, handleDescribeProducers},
		33: {0, 2, handleAlterConfigs},
		37: {0, 3, handleCreatePartitions},
		44: {0, 1, handleIncrementalAlterConfigs},
		// Consumer groups, classic protocol.
		8:  {0, 9, handleOffsetCommit},
		9:  {0, 9, handleOffsetFetch},
		10: {0, 6, handleFindCoordinator},
		11: {0, 9, handleJoinGroup},
		12: {0, 4, handleHeartbeat},
		13: {0, 5, handleLeaveGroup},
		14: {0, 5, handleSyncGroup},
		15: {0, 5, handleDescribeGroups},
		16: {0, 5, handleListGroups},
		42: {0, 2, handleDeleteGroups},
		47: {0, 0, handleOffsetDelete},
		// Security: SASL, ACLs, SCRAM users; each connection is offered
		// what applies to it (conn.offers).
		17: {0, 1, handleSaslHandshake},
		36: {0, 2, handleSaslAuthenticate},
		29: {0, 3, handleDescribeACLs},
		30: {0, 3, handleCreateACLs},
		31: {0, 3, handleDeleteACLs},
		50: {0, 0, handleDescribeUserSCRAMCredentials},
		51: {0, 0, handleAlterUserSCRAMCredentials},
	}
}

func (c *conn) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	s := c.s
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	keys := make([]int16, 0, len(s.apis))
	for k := range s.apis {
		if c.offers(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		a := s.apis[k]
		r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return r
}

func handleApiVersions(_ context.Context, c *conn, req kmsg.Request) func() kmsg.Response {
	r := c.apiVersionsResponse(req.GetVersion())
	return func() kmsg.Response { return r }
}

// errorCode maps an engine or record error to a Kafka error code.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, engine.ErrUnknownTopic), errors.Is(err, engine.ErrTopicDeleted):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, engine.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, engine.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, engine.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, engine.ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrMessageTooLarge), errors.Is(err, batch.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, engine.ErrDuplicateSequence):
		return kerr.DuplicateSequenceNumber.Code
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, engine.ErrUnknownProducerID):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, batch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, batch.ErrUnsupported):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, engine.ErrStorageUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, engine.ErrClosed):
		// Retriable: clients back off and try again.
		return kerr.KafkaStorageError.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
