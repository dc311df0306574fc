package kafkawire_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// TestApiVersionsVersions: v0-5 answer the table; v5's ClusterID and
// NodeID (KIP-1242), set together, must name this cluster and node, or
// the client is told to rebootstrap; one without the other is invalid.
// The connection stays usable after each.
func TestApiVersionsVersions(t *testing.T) {
	b := startBroker(t, engine.Options{})
	c := newRawGroupConn(t, b)
	cluster, other := b.eng.ClusterID(), "another-cluster"
	hasDTP := func(r *kmsg.ApiVersionsResponse) bool {
		for _, k := range r.ApiKeys {
			if k.ApiKey == kmsg.DescribeTopicPartitions.Int16() {
				return k.MinVersion == 0 && k.MaxVersion == 0
			}
		}
		return false
	}
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "test", "1"
		if r := c.do(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || !hasDTP(r) {
			t.Errorf("v%d: code %d, %d keys", v, r.ErrorCode, len(r.ApiKeys))
		}
	}
	for _, tc := range []struct {
		cluster *string
		node    int32
		want    *kerr.Error
	}{
		{&cluster, 0, nil},
		{&other, 0, kerr.RebootstrapRequired},
		{&cluster, 7, kerr.RebootstrapRequired},
		{&cluster, -1, kerr.InvalidRequest},
		{nil, 0, kerr.InvalidRequest},
		{nil, -1, nil},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 5, "test", "1"
		req.ClusterID, req.NodeID = tc.cluster, tc.node
		r := c.do(req).(*kmsg.ApiVersionsResponse)
		what := fmt.Sprintf("cluster %v node %d", tc.cluster != nil && *tc.cluster == cluster, tc.node)
		if tc.want == nil {
			if r.ErrorCode != 0 || !hasDTP(r) {
				t.Errorf("%s: code %d, %d keys", what, r.ErrorCode, len(r.ApiKeys))
			}
			continue
		}
		if r.ErrorCode != tc.want.Code || len(r.ApiKeys) != 0 {
			t.Errorf("%s: code %d, %d keys, want %s and none", what, r.ErrorCode, len(r.ApiKeys), tc.want.Message)
		}
	}
}

// logCapture keeps the messages a kgo client logs.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCapture) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *logCapture) Log(_ kgo.LogLevel, msg string, _ ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg)
}

func (l *logCapture) saw(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// TestApiVersionsRebootstrap: a franz-go client whose broker address now
// belongs to another korvet (started on a fresh Redis, so another
// cluster id) is told REBOOTSTRAP_REQUIRED when it reconnects, and goes
// on against the new cluster.
func TestApiVersionsRebootstrap(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	logs := &logCapture{}
	cl := b.client(kgo.WithLogger(logs), kgo.RetryTimeout(30*time.Second))
	ctx := ctxT(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rb", Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	first := b.eng.ClusterID()
	addr := b.addr
	b.stop()
	other := &broker{t: t, redis: testbed.StartRedis(t), opts: b.opts}
	other.start(addr)
	t.Cleanup(other.stop)
	if other.eng.ClusterID() == first {
		t.Fatalf("a fresh Redis kept cluster id %s", first)
	}
	// Straight to node 0, which the client knows as part of the first
	// cluster: its new connection names that cluster. (The first try
	// may still go out on the old connection and fail.)
	var err error
	for !logs.saw("REBOOTSTRAP_REQUIRED") {
		if ctx.Err() != nil {
			t.Fatalf("the client was not told to rebootstrap (last request: %v); it logged %q", err, logs.msgs)
		}
		_, err = cl.Broker(0).Request(ctx, kmsg.NewPtrMetadataRequest())
		time.Sleep(20 * time.Millisecond) // poll, not spin
	}
	// A new topic: "rb" is another topic (another id) there.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rb-after", Value: []byte("two")}).FirstErr(); err != nil {
		t.Fatalf("produce after the cluster changed: %v", err)
	}
	ends, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || ends.ClusterID == nil || *ends.ClusterID != other.eng.ClusterID() {
		t.Fatalf("metadata after rebootstrap: %v %+v", err, ends)
	}
}
