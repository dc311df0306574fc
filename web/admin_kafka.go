package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka requests several admin routes share, each run as the caller.

// metadataTopic is Metadata's answer for one topic; an error when the
// caller may not describe it or it does not exist.
func (s *server) metadataTopic(ctx context.Context, r *http.Request, topic string) (*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // describing never creates
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	t := &resp.Topics[0]
	if err := kafkaError(t.ErrorCode, nil, "topic "+topic); err != nil {
		return nil, err
	}
	sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
	return t, nil
}

// listOffsets answers ListOffsets at ts (-2 earliest, -1 latest, else a
// timestamp in ms) for partitions of topic: partition -> offset.
func (s *server) listOffsets(ctx context.Context, r *http.Request, topic string, partitions []int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(partitions))
	for _, t := range kr.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kafkaError(p.ErrorCode, nil, fmt.Sprintf("offsets of %s/%d", topic, p.Partition)); err != nil {
				return nil, err
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// configView is one topic config as the admin API shows it.
type configView struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"` // null for sensitive configs
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
	ReadOnly  bool    `json:"read_only"`
}

// describeConfigs is DescribeConfigs of one topic, sorted by name.
func (s *server) describeConfigs(ctx context.Context, r *http.Request, topic string) ([]configView, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("configs of topic %s: %d resources in the answer", topic, len(resp.Resources))
	}
	res := resp.Resources[0]
	if err := kafkaError(res.ErrorCode, res.ErrorMessage, "configs of topic "+topic); err != nil {
		return nil, err
	}
	out := make([]configView, 0, len(res.Configs))
	for _, c := range res.Configs {
		out = append(out, configView{Name: c.Name, Value: c.Value, Source: strings.ToLower(c.Source.String()), Sensitive: c.IsSensitive, ReadOnly: c.ReadOnly})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// partitionIDs lists the partitions of a Metadata topic.
func partitionIDs(t *kmsg.MetadataResponseTopic) []int32 {
	out := make([]int32, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		out = append(out, p.Partition)
	}
	return out
}
