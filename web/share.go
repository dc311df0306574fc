package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

// Share groups (KIP-932) on the status page, in /api/v1/share-groups and
// in /metrics.

type shareGroupJSON struct {
	Group      string               `json:"group"`
	State      string               `json:"state"` // Empty or Stable
	Epoch      int32                `json:"epoch"`
	Members    []shareMemberJSON    `json:"members"`
	InFlight   int64                `json:"in_flight"`
	Partitions []sharePartitionJSON `json:"partitions"`
	Error      string               `json:"error,omitempty"`
}

type shareMemberJSON struct {
	ID         string             `json:"id"`
	ClientID   string             `json:"client_id"`
	ClientHost string             `json:"client_host"`
	Epoch      int32              `json:"epoch"`
	Assignment map[string][]int32 `json:"assignment"`
}

type sharePartitionJSON struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	StartOffset     int64  `json:"start_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	InFlight        int64  `json:"in_flight"`
	Lag             int64  `json:"lag"`
	Deliveries      int64  `json:"deliveries"`
	Redeliveries    int64  `json:"redeliveries"`
	Accepted        int64  `json:"accepted"`
	Released        int64  `json:"released"`
	Rejected        int64  `json:"rejected"`
	ArchivedByLimit int64  `json:"archived_by_limit"`
}

func (s *server) apiShareGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, s.shareGroupViews(ctx, func(group string) bool { return s.allowed(r, auth.OpDescribe, auth.ResGroup, group) },
		func(topic string) bool { return s.mayTopic(r, auth.OpDescribe, topic) }))
}

// shareGroupViews lists the share groups (and the topics) the viewer may
// describe, with each partition's delivery state as Redis holds it.
func (s *server) shareGroupViews(ctx context.Context, mayGroup, mayTopic func(string) bool) []shareGroupJSON {
	names := s.eng.Share().Names()
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	out := []shareGroupJSON{}
	for _, name := range sorted {
		if !mayGroup(name) {
			continue
		}
		g, ok := s.eng.ShareDescribe(name)
		if !ok {
			continue
		}
		gj := shareGroupJSON{Group: name, State: "Empty", Epoch: g.Epoch, Members: []shareMemberJSON{}, Partitions: []sharePartitionJSON{}}
		if len(g.Members) > 0 {
			gj.State = "Stable"
		}
		for _, m := range g.Members {
			gj.Members = append(gj.Members, shareMemberJSON{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost, Epoch: m.Epoch, Assignment: m.Assignment})
		}
		parts, err := s.eng.ShareTopics(ctx, name)
		if err != nil {
			gj.Error = err.Error()
		}
		topics := make([]string, 0, len(parts))
		for t := range parts {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		for _, tn := range topics {
			t := s.eng.Topic(tn)
			if t == nil || !mayTopic(tn) {
				continue
			}
			ps := parts[tn]
			slices.Sort(ps)
			for _, id := range ps {
				p := t.Partition(id)
				if p == nil {
					continue
				}
				st, err := s.eng.ShareState(ctx, name, p)
				if err != nil {
					gj.Error = err.Error()
					continue
				}
				gj.InFlight += st.InFlight
				gj.Partitions = append(gj.Partitions, sharePartJSON(st, p))
			}
		}
		out = append(out, gj)
	}
	return out
}

func sharePartJSON(st engine.SharePartitionState, p *engine.Partition) sharePartitionJSON {
	return sharePartitionJSON{Topic: st.Topic, Partition: st.Partition, StartOffset: st.StartOffset, HighWatermark: p.HighWatermark(),
		InFlight: st.InFlight, Lag: st.Lag, Deliveries: st.Deliveries, Redeliveries: st.Redeliveries, Accepted: st.Accepted,
		Released: st.Released, Rejected: st.Rejected, ArchivedByLimit: st.ArchivedByLimit}
}

var (
	descShareMembers  = desc("korvet_share_group_members", "Members of a share group.", "group")
	descShareInFlight = desc("korvet_share_partition_in_flight", "Records of a share-partition acquired (or released) and not yet acknowledged: the Redis consumer group's PEL.", "group", "topic", "partition")
	descShareStart    = desc("korvet_share_partition_start_offset", "Share-partition start offset: nothing below it is available or in flight.", "group", "topic", "partition")
	descShareLag      = desc("korvet_share_partition_lag", "Records from the share-partition start offset on not yet acknowledged.", "group", "topic", "partition")
	descShareDeliv    = desc("korvet_share_deliveries_total", "Delivery attempts (acquisitions) of a share-partition's records.", "group", "topic", "partition")
	descShareRedeliv  = desc("korvet_share_redeliveries_total", "Deliveries after the first (lock expired or released).", "group", "topic", "partition")
	descShareAcks     = desc("korvet_share_acknowledgements_total", "Acknowledgements by type (accept, release, reject).", "group", "topic", "partition", "type")
	descShareArchived = desc("korvet_share_archived_by_limit_total", "Records archived because they reached the delivery count limit.", "group", "topic", "partition")
)

// shareCollector reads share groups for one scrape.
type shareCollector struct {
	s   *server
	ctx context.Context
}

func (c *shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareMembers, descShareInFlight, descShareStart, descShareLag, descShareDeliv, descShareRedeliv, descShareAcks, descShareArchived} {
		ch <- d
	}
}

func (c *shareCollector) Collect(ch chan<- prometheus.Metric) {
	all := func(string) bool { return true }
	for _, g := range c.s.shareGroupViews(c.ctx, all, all) {
		ch <- prometheus.MustNewConstMetric(descShareMembers, prometheus.GaugeValue, float64(len(g.Members)), g.Group)
		for _, p := range g.Partitions {
			l := []string{g.Group, p.Topic, strconv.Itoa(int(p.Partition))}
			gauge := func(d *prometheus.Desc, v int64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), l...)
			}
			counter := func(d *prometheus.Desc, v int64, extra ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(l, extra...)...)
			}
			gauge(descShareInFlight, p.InFlight)
			gauge(descShareStart, p.StartOffset)
			gauge(descShareLag, p.Lag)
			counter(descShareDeliv, p.Deliveries)
			counter(descShareRedeliv, p.Redeliveries)
			counter(descShareAcks, p.Accepted, "accept")
			counter(descShareAcks, p.Released, "release")
			counter(descShareAcks, p.Rejected, "reject")
			counter(descShareArchived, p.ArchivedByLimit)
		}
	}
}
