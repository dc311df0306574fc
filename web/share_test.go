package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/share"
)

// A share group with records in flight shows on /api/v1/share-groups and
// in /metrics with the figures Redis holds.
func TestShareGroupViews(t *testing.T) {
	eng, _ := openEngine(t)
	fill(t, eng, "jobs", 1, 10, "", 0)
	ctx := context.Background()
	if err := eng.IncrementalAlterGroupConfigs(ctx, "workers", []engine.ConfigOp{{Name: "share.auto.offset.reset", Value: "earliest"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ShareHeartbeat(ctx, share.HeartbeatRequest{Group: "workers", MemberID: "m1", Topics: []string{"jobs"}, ClientID: "cli"}); err != nil {
		t.Fatal(err)
	}
	p := eng.Topic("jobs").Partition(0)
	recs, err := eng.ShareAcquire(ctx, "workers", "m1", p, 4, 1<<20)
	if err != nil || len(recs.Records) != 4 {
		t.Fatalf("acquire: %v %v", recs, err)
	}
	recs.Release()
	if err := eng.ShareAcknowledge(ctx, "workers", "m1", p, []share.AckRun{{First: 0, Last: 0, Type: share.AckAccept}, {First: 1, Last: 1, Type: share.AckRelease}}); err != nil {
		t.Fatal(err)
	}
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet})
	var groups []shareGroupJSON
	get(t, h, "/api/v1/share-groups", &groups)
	if len(groups) != 1 || groups[0].Group != "workers" || groups[0].State != "Stable" || len(groups[0].Members) != 1 || groups[0].InFlight != 3 {
		t.Fatalf("share groups = %+v", groups)
	}
	want := sharePartitionJSON{Topic: "jobs", Partition: 0, StartOffset: 1, HighWatermark: 10, InFlight: 3, Lag: 9, Deliveries: 4, Accepted: 1, Released: 1}
	if got := groups[0].Partitions; len(got) != 1 || got[0] != want {
		t.Fatalf("partitions = %+v, want %+v", got, want)
	}

	w := get(t, h, "/metrics", nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{"korvet_share_partition_in_flight": 3, "korvet_share_partition_start_offset": 1, "korvet_share_deliveries_total": 4, "korvet_share_group_members": 1} {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("%s missing", name)
			continue
		}
		m := f.Metric[0]
		got := 0.0
		switch {
		case m.Gauge != nil:
			got = m.Gauge.GetValue()
		case m.Counter != nil:
			got = m.Counter.GetValue()
		}
		if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if f := fams["korvet_share_acknowledgements_total"]; f == nil || len(f.Metric) != 3 {
		t.Errorf("korvet_share_acknowledgements_total: %v", f)
	}
}
