package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic routes: create, describe, delete, alter configs, add partitions.

type topicCreateBody struct {
	Name       string            `json:"name"`
	Partitions int32             `json:"partitions"` // 0: the broker's num.partitions
	Configs    map[string]string `json:"configs"`
}

type topicCreatedJSON struct {
	Name       string            `json:"name"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
}

func (s *server) topicCreate(w http.ResponseWriter, r *http.Request) {
	var b topicCreateBody
	if err := decodeBody(w, r, &b); err != nil {
		s.finish(w, r, "topic.create", "", 0, nil, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	out, err := s.createTopic(ctx, r, b)
	s.finish(w, r, "topic.create", "topic:"+b.Name, http.StatusCreated, out, err)
}

func (s *server) createTopic(ctx context.Context, r *http.Request, b topicCreateBody) (*topicCreatedJSON, error) {
	if b.Name == "" {
		return nil, invalid("field name: the topic's name is missing")
	}
	if b.Partitions < 0 {
		return nil, invalid("field partitions: must be at least 1 (or left out for the broker's default)")
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = b.Name, -1, -1
	if b.Partitions > 0 {
		rt.NumPartitions = b.Partitions
	}
	names := make([]string, 0, len(b.Configs))
	for k := range b.Configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(b.Configs[k])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("create topic %s: %d topics in the answer", b.Name, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kafkaError(t.ErrorCode, t.ErrorMessage, "create topic "+b.Name); err != nil {
		return nil, err
	}
	out := &topicCreatedJSON{Name: t.Topic, Partitions: t.NumPartitions, Configs: map[string]string{}}
	for k, v := range b.Configs {
		out.Configs[k] = v
	}
	return out, nil
}

type topicDescJSON struct {
	Name       string              `json:"name"`
	ID         string              `json:"id"`
	Internal   bool                `json:"internal"`
	Partitions []topicPartDescJSON `json:"partitions"`
	Configs    []configView        `json:"configs"`
	// ConfigsError is set, and Configs empty, when the caller may
	// describe the topic but not its configs (DESCRIBE_CONFIGS).
	ConfigsError string `json:"configs_error,omitempty"`
}

type topicPartDescJSON struct {
	Partition   int32 `json:"partition"`
	Leader      int32 `json:"leader"`
	LeaderEpoch int32 `json:"leader_epoch"`
	StartOffset int64 `json:"start_offset"`
	EndOffset   int64 `json:"end_offset"`
	Records     int64 `json:"records"`
}

func (s *server) topicDescribe(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	out, err := s.describeTopic(ctx, r, r.PathValue("topic"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) describeTopic(ctx context.Context, r *http.Request, topic string) (*topicDescJSON, error) {
	t, err := s.metadataTopic(ctx, r, topic)
	if err != nil {
		return nil, err
	}
	ids := partitionIDs(t)
	start, err := s.listOffsets(ctx, r, topic, ids, -2)
	if err != nil {
		return nil, err
	}
	end, err := s.listOffsets(ctx, r, topic, ids, -1)
	if err != nil {
		return nil, err
	}
	out := &topicDescJSON{Name: topic, ID: uuid(t.TopicID), Internal: t.IsInternal, Partitions: []topicPartDescJSON{}, Configs: []configView{}}
	for _, p := range t.Partitions {
		pd := topicPartDescJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, StartOffset: start[p.Partition], EndOffset: end[p.Partition]}
		pd.Records = max(pd.EndOffset-pd.StartOffset, 0)
		out.Partitions = append(out.Partitions, pd)
	}
	cfgs, err := s.describeConfigs(ctx, r, topic)
	switch {
	case err == nil:
		out.Configs = cfgs
	case errorCode(err) == "topic_authorization_failed":
		out.ConfigsError = err.Error()
	default:
		return nil, err
	}
	return out, nil
}

func (s *server) topicDelete(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	err := s.deleteTopic(ctx, r, topic)
	s.finish(w, r, "topic.delete", "topic:"+topic, http.StatusOK, map[string]string{"deleted": topic}, err)
}

func (s *server) deleteTopic(ctx context.Context, r *http.Request, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("delete topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	return kafkaError(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage, "delete topic "+topic)
}

type alterConfigsBody struct {
	Set    map[string]string `json:"set"`
	Delete []string          `json:"delete"`
}

func (s *server) topicAlterConfigs(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var b alterConfigsBody
	if err := decodeBody(w, r, &b); err != nil {
		s.finish(w, r, "topic.alter_configs", "topic:"+topic, 0, nil, err)
		return
	}
	validate, err := boolParam(r, "validate_only")
	if err != nil {
		s.finish(w, r, "topic.alter_configs", "topic:"+topic, 0, nil, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	var out map[string]any
	if err = s.alterConfigs(ctx, r, topic, b, validate); err == nil {
		var cfgs []configView
		if cfgs, err = s.describeConfigs(ctx, r, topic); err == nil {
			out = map[string]any{"configs": cfgs, "validate_only": validate}
		}
	}
	action := "topic.alter_configs"
	if validate {
		action = "topic.validate_configs"
	}
	s.finish(w, r, action, "topic:"+topic, http.StatusOK, out, err)
}

func (s *server) alterConfigs(ctx context.Context, r *http.Request, topic string, b alterConfigsBody, validate bool) error {
	if len(b.Set) == 0 && len(b.Delete) == 0 {
		return invalid("nothing to change: send {\"set\":{\"name\":\"value\"}} and/or {\"delete\":[\"name\"]}")
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validate
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	names := make([]string, 0, len(b.Set))
	for k := range b.Set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(b.Set[k])
		rr.Configs = append(rr.Configs, c)
	}
	for _, k := range b.Delete {
		if _, both := b.Set[k]; both {
			return invalid("config " + k + " is both set and deleted")
		}
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 {
		return fmt.Errorf("alter configs of %s: %d resources in the answer", topic, len(resp.Resources))
	}
	return kafkaError(resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage, "alter configs of topic "+topic)
}

type addPartitionsBody struct {
	Count int32 `json:"count"` // the new total
}

func (s *server) topicAddPartitions(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var b addPartitionsBody
	err := decodeBody(w, r, &b)
	if err == nil && b.Count <= 0 {
		err = invalid("field count: the new total number of partitions, above the current one")
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		err = s.addPartitions(ctx, r, topic, b.Count)
	}
	s.finish(w, r, "topic.add_partitions", "topic:"+topic, http.StatusOK, map[string]int32{"partitions": b.Count}, err)
}

func (s *server) addPartitions(ctx context.Context, r *http.Request, topic string, count int32) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.CreatePartitionsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("add partitions to %s: %d topics in the answer", topic, len(resp.Topics))
	}
	return kafkaError(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage, "add partitions to topic "+topic)
}

// boolParam reads an optional true/false query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, invalid(fmt.Sprintf("query parameter %s: %q is not true or false", name, v))
	}
}
