package kafkawire

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire/records"
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
// is what ApiVersions advertises, so nothing may be listed that is not served.
func apiTable() map[int16]apiDef {
	return map[int16]apiDef{
		0:  {3, 13, handleProduce},
		1:  {4, 18, handleFetch},
		2:  {0, 11, handleListOffsets},
		3:  {0, 13, handleMetadata},
		18: {0, 5, handleApiVersions},
		19: {0, 7, handleCreateTopics},
		20: {0, 6, handleDeleteTopics},
		22: {0, 5, handleInitProducerID},
	}
}

func (s *Server) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	keys := make([]int16, 0, len(s.apis))
	for k := range s.apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		a := s.apis[k]
		r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return r
}

func handleApiVersions(_ context.Context, c *conn, req kmsg.Request) func() kmsg.Response {
	r := c.s.apiVersionsResponse(req.GetVersion())
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
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrMessageTooLarge), errors.Is(err, records.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, engine.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, records.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, records.ErrUnsupported):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, engine.ErrStorageUnavailable), errors.Is(err, context.DeadlineExceeded):
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
