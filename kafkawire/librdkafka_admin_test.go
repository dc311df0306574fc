package kafkawire_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestLibrdkafkaAdminViews: what librdkafka's metadata and admin calls
// see of korvet (kcat -L; confluent-kafka's AdminClient list_topics,
// list_groups, and describe_cluster and list_consumer_groups where the
// installed confluent-kafka has them): the broker, each partition's
// leader, replicas and ISR, and the groups.
func TestLibrdkafkaAdminViews(t *testing.T) {
	kcat := kcatPath(t)
	py := needTool(t, "/usr/bin/python3", "-c", "import confluent_kafka")
	b := startBroker(t, groupOpts())
	adm := b.admin()
	ctx := ctxT(t, 60*time.Second)
	for name, n := range map[string]int32{"lv-a": 3, "lv-b": 1} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "lv-a", Partition: 1, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "lv-g", offs); err != nil {
		t.Fatal(err)
	}
	broker := fmt.Sprintf("0@127.0.0.1:%d", port(b.addr))
	wantParts := map[string]int{"lv-a": 3, "lv-b": 1}

	t.Run("kcat -L", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, kcat, "-L", "-J", "-b", b.addr, "-m", "10").Output()
		if err != nil {
			t.Fatalf("kcat -L: %v", err)
		}
		var md struct {
			Brokers []struct {
				ID   int32  `json:"id"`
				Name string `json:"name"`
			} `json:"brokers"`
			Topics []struct {
				Topic      string `json:"topic"`
				Partitions []struct {
					Partition int32                `json:"partition"`
					Leader    int32                `json:"leader"`
					Replicas  []struct{ ID int32 } `json:"replicas"`
					ISRs      []struct{ ID int32 } `json:"isrs"`
				} `json:"partitions"`
			} `json:"topics"`
		}
		if err := json.Unmarshal(out, &md); err != nil {
			t.Fatalf("kcat -L -J: %v\n%s", err, out)
		}
		if len(md.Brokers) != 1 || fmt.Sprintf("%d@%s", md.Brokers[0].ID, md.Brokers[0].Name) != broker {
			t.Errorf("brokers %+v, want %s", md.Brokers, broker)
		}
		seen := 0
		for _, tp := range md.Topics {
			want, ok := wantParts[tp.Topic]
			if !ok {
				continue
			}
			seen++
			if len(tp.Partitions) != want {
				t.Errorf("%s: %d partitions, want %d", tp.Topic, len(tp.Partitions), want)
			}
			for _, p := range tp.Partitions {
				if p.Leader != 0 || len(p.Replicas) != 1 || p.Replicas[0].ID != 0 || len(p.ISRs) != 1 || p.ISRs[0].ID != 0 {
					t.Errorf("%s/%d: %+v", tp.Topic, p.Partition, p)
				}
			}
		}
		if seen != len(wantParts) {
			t.Errorf("kcat listed %d of the topics: %s", seen, out)
		}
	})

	t.Run("confluent-kafka AdminClient", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, py, "testdata/confluent_admin_views.py", b.addr).CombinedOutput()
		if err != nil {
			t.Fatalf("confluent-kafka: %v\n%s", err, out)
		}
		var v struct {
			ClusterID string   `json:"cluster_id"`
			Brokers   []string `json:"brokers"`
			Topics    map[string]struct {
				Error      *string          `json:"error"`
				Partitions map[string][]any `json:"partitions"`
			} `json:"topics"`
			Groups          []string `json:"groups"`
			DescribeCluster *struct {
				ClusterID string   `json:"cluster_id"`
				Nodes     []string `json:"nodes"`
			} `json:"describe_cluster"`
			ListConsumerGroups []string `json:"list_consumer_groups"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("confluent-kafka output: %v\n%s", err, out)
		}
		if v.ClusterID != b.eng.ClusterID() || !slices.Equal(v.Brokers, []string{broker}) {
			t.Errorf("list_topics: cluster %q brokers %v, want %q %s", v.ClusterID, v.Brokers, b.eng.ClusterID(), broker)
		}
		for name, n := range wantParts {
			tp, ok := v.Topics[name]
			if !ok || tp.Error != nil || len(tp.Partitions) != n {
				t.Errorf("list_topics %s: %+v, want %d partitions", name, tp, n)
				continue
			}
			for id, p := range tp.Partitions {
				if got := fmt.Sprint(p); got != "[0 [0] [0]]" {
					t.Errorf("list_topics %s/%s: leader, replicas, isrs %s", name, id, got)
				}
			}
		}
		if !slices.Contains(v.Groups, "lv-g//Empty") {
			t.Errorf("list_groups: %v, want lv-g (Empty)", v.Groups)
		}
		if v.DescribeCluster != nil && (v.DescribeCluster.ClusterID != b.eng.ClusterID() || !slices.Equal(v.DescribeCluster.Nodes, []string{broker})) {
			t.Errorf("describe_cluster: %+v", v.DescribeCluster)
		}
		if v.ListConsumerGroups != nil && !slices.Contains(v.ListConsumerGroups, "lv-g") {
			t.Errorf("list_consumer_groups: %v", v.ListConsumerGroups)
		}
		if v.DescribeCluster == nil || v.ListConsumerGroups == nil {
			t.Logf("this confluent-kafka has no describe_cluster / list_consumer_groups; checked list_topics and list_groups")
		}
	})
}
