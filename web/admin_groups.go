package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group routes: describe (with lag and its history), reset offsets, delete.

type groupDescJSON struct {
	Group      string            `json:"group"`
	Type       string            `json:"type"` // classic or consumer
	State      string            `json:"state"`
	Protocol   string            `json:"protocol"`
	Members    []memberDescJSON  `json:"members"`
	Offsets    []groupOffsetJSON `json:"offsets"`
	LagHistory []lagSample       `json:"lag_history"`
}

type memberDescJSON struct {
	MemberID    string           `json:"member_id"`
	ClientID    string           `json:"client_id"`
	Host        string           `json:"host"`
	Assignments []topicPartsJSON `json:"assignments"`
}

type groupOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	EndOffset int64  `json:"end_offset"`
	Lag       int64  `json:"lag"`
}

func (s *server) groupDescribe(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	g, err := s.describeGroup(ctx, r, name)
	if err == nil {
		g.Offsets, err = s.groupOffsets(ctx, r, name)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	g.LagHistory = s.lagHistory.history(name)
	writeJSON(w, http.StatusOK, g)
}

// describeGroup is DescribeGroups, or ConsumerGroupDescribe for a KIP-848
// group, as r's caller.
func (s *server) describeGroup(ctx context.Context, r *http.Request, name string) (*groupDescJSON, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{name}
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("describe group %s: %d groups in the answer", name, len(resp.Groups))
	}
	dg := resp.Groups[0]
	if dg.ErrorCode == kerr.GroupIDNotFound.Code && dg.State != "Dead" {
		return s.describeConsumerGroup(ctx, r, name)
	}
	if err := kafkaError(dg.ErrorCode, dg.ErrorMessage, "describe group "+name); err != nil {
		return nil, err
	}
	if dg.State == "Dead" {
		return nil, &apiError{status: http.StatusNotFound, code: "group_id_not_found", msg: "group " + name + " does not exist"}
	}
	g := &groupDescJSON{Group: name, Type: "classic", State: strings.ToLower(dg.State), Protocol: dg.Protocol, Members: []memberDescJSON{}}
	for _, m := range dg.Members {
		md := memberDescJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignments: []topicPartsJSON{}}
		if dg.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.MemberAssignment) == nil {
				for _, t := range a.Topics {
					md.Assignments = append(md.Assignments, topicPartsJSON{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
		}
		g.Members = append(g.Members, md)
	}
	return g, nil
}

func (s *server) describeConsumerGroup(ctx context.Context, r *http.Request, name string) (*groupDescJSON, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{name}
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.ConsumerGroupDescribeResponse)
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("describe group %s: %d groups in the answer", name, len(resp.Groups))
	}
	dg := resp.Groups[0]
	if err := kafkaError(dg.ErrorCode, dg.ErrorMessage, "describe group "+name); err != nil {
		return nil, err
	}
	g := &groupDescJSON{Group: name, Type: "consumer", State: strings.ToLower(dg.State), Protocol: dg.AssignorName, Members: []memberDescJSON{}}
	for _, m := range dg.Members {
		md := memberDescJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignments: []topicPartsJSON{}}
		for _, t := range m.Assignment.TopicPartitions {
			topic := t.Topic
			if tp := s.eng.TopicByID(t.TopicID); topic == "" && tp != nil {
				topic = tp.Name()
			}
			md.Assignments = append(md.Assignments, topicPartsJSON{Topic: topic, Partitions: t.Partitions})
		}
		g.Members = append(g.Members, md)
	}
	return g, nil
}

// groupOffsets is the group's committed offsets (OffsetFetch) with each
// partition's end offset and lag.
func (s *server) groupOffsets(ctx context.Context, r *http.Request, name string) ([]groupOffsetJSON, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberEpoch = name, -1
	req.Groups = append(req.Groups, rg)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.OffsetFetchResponse)
	out := []groupOffsetJSON{}
	for _, g := range resp.Groups {
		if err := kafkaError(g.ErrorCode, nil, "offsets of group "+name); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			var ps []int32
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset >= 0 {
					ps = append(ps, p.Partition)
				}
			}
			if len(ps) == 0 {
				continue
			}
			end, err := s.listOffsets(ctx, r, t.Topic, ps, -1)
			if err != nil {
				return nil, err
			}
			for _, p := range t.Partitions {
				if !slices.Contains(ps, p.Partition) {
					continue
				}
				o := groupOffsetJSON{Topic: t.Topic, Partition: p.Partition, Committed: p.Offset, EndOffset: end[p.Partition]}
				o.Lag = max(o.EndOffset-o.Committed, 0)
				out = append(out, o)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out, nil
}

type resetOffsetsBody struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"` // absent: all
	To         string  `json:"to"`
	Timestamp  *int64  `json:"timestamp"`
	Offset     *int64  `json:"offset"`
	DryRun     bool    `json:"dry_run"`
}

type topicOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (s *server) groupResetOffsets(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	var b resetOffsetsBody
	err := decodeBody(w, r, &b)
	var out []topicOffsetJSON
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.resetOffsets(ctx, r, name, b)
	}
	action := "group.reset_offsets"
	if b.DryRun {
		action = "group.reset_offsets_dry_run"
	}
	s.finish(w, r, action, "group:"+name+" topic:"+b.Topic, http.StatusOK, map[string]any{"offsets": out, "dry_run": b.DryRun}, err)
}

func (s *server) resetOffsets(ctx context.Context, r *http.Request, name string, b resetOffsetsBody) ([]topicOffsetJSON, error) {
	if b.Topic == "" {
		return nil, invalid("field topic: the topic whose offsets to reset")
	}
	to := strings.ToLower(b.To)
	switch {
	case to == "timestamp" && b.Timestamp == nil:
		return nil, invalid(`field timestamp: "to":"timestamp" needs a timestamp in milliseconds since the epoch`)
	case to == "offset" && b.Offset == nil:
		return nil, invalid(`field offset: "to":"offset" needs an offset`)
	case to != "earliest" && to != "latest" && to != "timestamp" && to != "offset":
		return nil, invalid(fmt.Sprintf("field to: %q is not earliest, latest, timestamp or offset", b.To))
	}
	// Refused while the group has members, as kafka-consumer-groups.sh:
	// they would commit over the reset.
	g, err := s.describeGroup(ctx, r, name)
	switch {
	case errorCode(err) == "group_id_not_found":
		// No group yet: offsets may be set before its first member.
	case err != nil:
		return nil, err
	case len(g.Members) > 0:
		return nil, groupNotEmpty(name, len(g.Members))
	}
	t, err := s.metadataTopic(ctx, r, b.Topic)
	if err != nil {
		return nil, err
	}
	ps := partitionIDs(t)
	if len(b.Partitions) > 0 {
		for _, p := range b.Partitions {
			if !slices.Contains(ps, p) {
				return nil, invalid(fmt.Sprintf("field partitions: topic %s has no partition %d", b.Topic, p))
			}
		}
		ps = b.Partitions
	}
	start, err := s.listOffsets(ctx, r, b.Topic, ps, -2)
	if err != nil {
		return nil, err
	}
	end, err := s.listOffsets(ctx, r, b.Topic, ps, -1)
	if err != nil {
		return nil, err
	}
	target := map[int32]int64{}
	switch to {
	case "earliest":
		target = start
	case "latest":
		target = end
	case "timestamp":
		at, err := s.listOffsets(ctx, r, b.Topic, ps, *b.Timestamp)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if target[p] = at[p]; at[p] < 0 { // nothing at or after it
				target[p] = end[p]
			}
		}
	case "offset":
		// Clamped into the log, as kafka-consumer-groups.sh does.
		for _, p := range ps {
			target[p] = min(max(*b.Offset, start[p]), end[p])
		}
	}
	out := make([]topicOffsetJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, topicOffsetJSON{Topic: b.Topic, Partition: p, Offset: target[p]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	if b.DryRun {
		return out, nil
	}
	return out, s.commitOffsets(ctx, r, name, out)
}

func groupNotEmpty(name string, members int) error {
	return &apiError{status: http.StatusConflict, code: "group_not_empty",
		msg: fmt.Sprintf("group %s has %d active member(s): stop its consumers first (offsets are only reset while a group is empty)", name, members)}
}

// commitOffsets commits offsets for the group as an admin client does:
// generation -1, no member. A group that gained members meanwhile refuses.
func (s *server) commitOffsets(ctx context.Context, r *http.Request, name string, offsets []topicOffsetJSON) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = name, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = offsets[0].Topic
	for _, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = o.Partition, o.Offset, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	for _, t := range kr.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code, kerr.RebalanceInProgress.Code:
				return groupNotEmpty(name, 1)
			}
			if err := kafkaError(p.ErrorCode, nil, fmt.Sprintf("commit offset of %s/%d for group %s", t.Topic, p.Partition, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *server) groupDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	err := s.deleteGroup(ctx, r, name)
	s.finish(w, r, "group.delete", "group:"+name, http.StatusOK, map[string]string{"deleted": name}, err)
}

func (s *server) deleteGroup(ctx context.Context, r *http.Request, name string) error {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{name}
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != 1 {
		return fmt.Errorf("delete group %s: %d groups in the answer", name, len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.ErrorCode == kerr.NonEmptyGroup.Code {
		return &apiError{status: http.StatusConflict, code: "non_empty_group", msg: "group " + name + " has active members: stop its consumers first"}
	}
	return kafkaError(g.ErrorCode, g.ErrorMessage, "delete group "+name)
}
