package group

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/korvet/korvet/resp"
)

// storedConsumerGroup is what Redis keeps of a consumer group (key
// ConsumerGroupState), written whenever its epochs, members or
// assignments change. After a restart members carry on with the epochs
// they have; each gets a full session timeout to show up.
type storedConsumerGroup struct {
	Epoch       int32                  `json:"epoch"`
	TargetEpoch int32                  `json:"target_epoch"`
	Assignor    string                 `json:"assignor"`
	TopicsHash  string                 `json:"topics_hash"`
	Members     []storedConsumerMember `json:"members,omitempty"`
}

type storedConsumerMember struct {
	ID          string             `json:"id"`
	InstanceID  string             `json:"instance_id,omitempty"`
	RackID      string             `json:"rack_id,omitempty"`
	ClientID    string             `json:"client_id"`
	ClientHost  string             `json:"client_host"`
	Epoch       int32              `json:"epoch"`
	PrevEpoch   int32              `json:"prev_epoch"`
	State       string             `json:"state"`
	LeftStatic  bool               `json:"left_static,omitempty"`
	Topics      []string           `json:"topics,omitempty"`
	Regex       string             `json:"regex,omitempty"`
	Assignor    string             `json:"assignor,omitempty"`
	RebalanceMs int64              `json:"rebalance_ms"`
	Assigned    map[string][]int32 `json:"assigned,omitempty"`
	Revoking    map[string][]int32 `json:"revoking,omitempty"`
	Target      map[string][]int32 `json:"target,omitempty"`
	// AssignedAt: topic id -> partition -> the epoch it was given to the
	// member at, for OffsetCommit's epoch check. Absent in state written
	// before it was kept: commits from older epochs are then accepted.
	AssignedAt map[string]map[int32]int32 `json:"assigned_at,omitempty"`
	// A classic member's protocols, answered protocol and session.
	Classic *storedClassic `json:"classic,omitempty"`
}

type storedClassic struct {
	Protocols []Protocol `json:"protocols"`
	Protocol  string     `json:"protocol"`
	SessionMs int64      `json:"session_ms"`
}

func encodeAssignment(a Assignment) map[string][]int32 {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		out[hex.EncodeToString(t[:])] = ps
	}
	return out
}

func decodeAssignment(m map[string][]int32) (Assignment, error) {
	out := Assignment{}
	for k, ps := range m {
		var t TopicID
		b, err := hex.DecodeString(k)
		if err != nil || len(b) != len(t) {
			return nil, fmt.Errorf("bad topic id %q", k)
		}
		copy(t[:], b)
		for _, p := range ps {
			out.Add(t, p)
		}
	}
	return out, nil
}

// encodeAssignedAt keeps the epochs of the partitions the member owns.
func encodeAssignedAt(at map[partKey]int32, owned Assignment) map[string]map[int32]int32 {
	var out map[string]map[int32]int32
	for k, epoch := range at {
		if !owned.has(k.t, k.p) {
			continue
		}
		if out == nil {
			out = map[string]map[int32]int32{}
		}
		id := hex.EncodeToString(k.t[:])
		if out[id] == nil {
			out[id] = map[int32]int32{}
		}
		out[id][k.p] = epoch
	}
	return out
}

func decodeAssignedAt(m map[string]map[int32]int32) (map[partKey]int32, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[partKey]int32)
	for k, ps := range m {
		var t TopicID
		b, err := hex.DecodeString(k)
		if err != nil || len(b) != len(t) {
			return nil, fmt.Errorf("bad topic id %q", k)
		}
		copy(t[:], b)
		for p, epoch := range ps {
			out[partKey{t, p}] = epoch
		}
	}
	return out, nil
}

// persistConsumer stores the consumer group under g.mu; a failed write is
// logged (a restart then makes the members rejoin).
func (g *group) persistConsumer() {
	c, cg := g.c, g.cg
	if g.gone {
		return
	}
	sg := storedConsumerGroup{Epoch: cg.epoch, TargetEpoch: cg.targetEpoch, Assignor: cg.assignor, TopicsHash: cg.topicsHash}
	for _, m := range g.sortedConsumers() {
		var sc *storedClassic
		if m.classic != nil {
			sc = &storedClassic{Protocols: m.classic.protocols, Protocol: m.classic.protocol, SessionMs: m.classic.session.Milliseconds()}
		}
		sg.Members = append(sg.Members, storedConsumerMember{Classic: sc,
			ID: m.id, InstanceID: m.instance, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: m.state.String(), LeftStatic: m.leftStatic,
			Topics: m.names, Regex: m.regex, Assignor: m.assignor, RebalanceMs: m.rebalance.Milliseconds(),
			Assigned: encodeAssignment(m.assigned), Revoking: encodeAssignment(m.revoking), Target: encodeAssignment(cg.target[m.id]),
			AssignedAt: encodeAssignedAt(m.assignedAt, m.assigned),
		})
	}
	js, err := json.Marshal(sg)
	if err != nil {
		c.log.Error("encode consumer group state", "group", g.name, "err", err)
		return
	}
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	pl.Cmd("SET", c.k.ConsumerGroupState(g.name), js)
	pl.Cmd("UNLINK", c.k.GroupState(g.name))
	pl.Cmd("HSET", c.k.Groups(), g.name, "consumer")
	pl.Cmd("EXEC")
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	if err := c.execTx(ctx, &pl); err != nil {
		c.log.Warn("could not store consumer group; a restart will make its members rejoin", "group", g.name, "epoch", cg.epoch, "err", err)
		return
	}
	g.stored = true
}

func (g *group) restoreConsumer(sg storedConsumerGroup, now time.Time) error {
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch, cg.assignor, cg.topicsHash = sg.Epoch, sg.TargetEpoch, sg.Assignor, sg.TopicsHash
	for _, sm := range sg.Members {
		m := &cmember{id: sm.ID, instance: sm.InstanceID, rack: sm.RackID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			epoch: sm.Epoch, prevEpoch: sm.PrevEpoch, leftStatic: sm.LeftStatic, names: sm.Topics, assignor: sm.Assignor,
			rebalance: time.Duration(sm.RebalanceMs) * time.Millisecond, deadline: now.Add(g.c.opts.Consumer.SessionTimeout)}
		if sm.Classic != nil {
			m.classic = &classicState{protocols: sm.Classic.Protocols, protocol: sm.Classic.Protocol, session: time.Duration(sm.Classic.SessionMs) * time.Millisecond}
			m.deadline = now.Add(m.classic.session)
		}
		for i, n := range memberStateNames {
			if n == sm.State {
				m.state = memberState(i)
			}
		}
		if sm.Regex != "" {
			re, err := regexp.Compile("^(?:" + sm.Regex + ")$")
			if err != nil {
				return fmt.Errorf("member %q: %w", sm.ID, err)
			}
			m.regex, m.re = sm.Regex, re
		}
		var err error
		if m.assigned, err = decodeAssignment(sm.Assigned); err != nil {
			return err
		}
		if m.revoking, err = decodeAssignment(sm.Revoking); err != nil {
			return err
		}
		if m.assignedAt, err = decodeAssignedAt(sm.AssignedAt); err != nil {
			return err
		}
		tgt, err := decodeAssignment(sm.Target)
		if err != nil {
			return err
		}
		if m.state == memberUnrevoked {
			m.revokeDeadline = now.Add(m.rebalance)
		}
		cg.members[m.id] = m
		cg.target[m.id] = tgt
		if m.instance != "" {
			cg.statics[m.instance] = m.id
		}
	}
	g.cg = cg
	g.protocolType = "consumer"
	g.members = map[string]*member{}
	g.syncClassicState()
	g.reschedule()
	return nil
}
