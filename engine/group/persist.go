package group

import (
	"context"
	"encoding/json"
	"time"

	"github.com/korvet/korvet/resp"
)

// storedGroup is what Redis keeps of a group's membership, written when a
// generation forms and when it turns Stable (as Kafka writes its group
// metadata). After a restart members keep their ids, generation and
// assignments: their heartbeats go on working and nothing rebalances. It
// also keeps generations increasing across restarts, which cooperative
// clients rely on to judge stale partition claims.
type storedGroup struct {
	Generation   int32          `json:"generation"`
	State        string         `json:"state"`
	ProtocolType string         `json:"protocol_type,omitempty"`
	Protocol     string         `json:"protocol,omitempty"`
	Leader       string         `json:"leader,omitempty"`
	Members      []storedMember `json:"members,omitempty"`
}

type storedMember struct {
	ID          string     `json:"id"`
	InstanceID  string     `json:"instance_id,omitempty"`
	ClientID    string     `json:"client_id"`
	ClientHost  string     `json:"client_host"`
	SessionMs   int64      `json:"session_ms"`
	RebalanceMs int64      `json:"rebalance_ms"`
	Protocols   []Protocol `json:"protocols"`
	Assignment  []byte     `json:"assignment,omitempty"`
}

// persistTimeout bounds a membership write, which runs under the group's
// lock.
const persistTimeout = 2 * time.Second

// persist stores the group's membership under g.mu, an Empty group's
// too: like Kafka, which keeps an emptied group's metadata record until
// its cleanup, korvet keeps it until the cleanup (cleanup.go) removes the
// group, so it is still there, Empty, after a restart. A failed write is
// logged and the group goes on: a restart then costs it a rebalance.
func (g *group) persist() {
	c := g.c
	if g.gone {
		return
	}
	var pl resp.Pipeline
	pl.Cmd("MULTI")
	sg := storedGroup{Generation: g.generation, State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	for _, m := range g.sortedMembers() {
		sg.Members = append(sg.Members, storedMember{
			ID: m.id, InstanceID: m.instance, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionMs: m.session.Milliseconds(), RebalanceMs: m.rebalance.Milliseconds(),
			Protocols: m.protocols, Assignment: m.assignment,
		})
	}
	js, err := json.Marshal(sg)
	if err != nil {
		c.log.Error("encode group state", "group", g.name, "err", err)
		return
	}
	pl.Cmd("SET", c.k.GroupState(g.name), js)
	pl.Cmd("UNLINK", c.k.ConsumerGroupState(g.name))
	pl.Cmd("HSET", c.k.Groups(), g.name, g.protocolType)
	pl.Cmd("EXEC")
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	if err := c.execTx(ctx, &pl); err != nil {
		c.log.Warn("could not store group membership; a restart will make its members rejoin", "group", g.name, "generation", g.generation, "err", err)
		return
	}
	g.stored = true
}

// restore rebuilds a group from its stored state. Members get a full
// session timeout to show up. A group stored mid-rebalance (its members
// never got their assignments) starts a join phase they all must rejoin.
func (g *group) restore(sg storedGroup, now time.Time) {
	g.generation = sg.Generation
	g.protocolType = sg.ProtocolType
	g.protocol = sg.Protocol
	g.leader = sg.Leader
	for _, sm := range sg.Members {
		m := &member{
			id: sm.ID, instance: sm.InstanceID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			session:   time.Duration(sm.SessionMs) * time.Millisecond,
			rebalance: time.Duration(sm.RebalanceMs) * time.Millisecond,
			protocols: sm.Protocols, assignment: sm.Assignment,
		}
		m.deadline = now.Add(m.session)
		g.members[m.id] = m
		if m.instance != "" {
			g.statics[m.instance] = m.id
		}
	}
	switch {
	case len(g.members) == 0:
		g.state = Empty
		g.protocol, g.leader = "", ""
	case sg.State == Stable.String():
		g.state = Stable
	default:
		g.state = PreparingRebalance
		g.joinDeadline = now.Add(g.maxRebalanceTimeout())
	}
	g.reschedule()
}
