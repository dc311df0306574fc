package kafkawire_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// orderJSON is a ~700-byte order event: JSON like the sensor documents,
// but with other names and words, so that a dictionary trained on those
// compresses it noticeably worse.
func orderJSON(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 23))
	words := []string{"express", "gift wrap", "leave at door", "fragile", "call first", "weekend", "pickup point", "no invoice"}
	var b strings.Builder
	fmt.Fprintf(&b, `{"order_no":"ORD-%08d","placed_at":"2026-11-%02dT%02d:%02d:%02d+01:00","customer":{"cust_ref":"C%06d","tier":"%s","email_domain":"%s"},`,
		i, 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000000),
		[]string{"bronze", "silver", "gold", "platinum"}[rng.IntN(4)], []string{"example.org", "mail.test", "post.invalid"}[rng.IntN(3)])
	b.WriteString(`"lines":[`)
	for j := range 3 + rng.IntN(3) {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"article":"ART-%05d","qty":%d,"unit_price_eur":%d.%02d,"vat_class":"%s"}`,
			rng.IntN(50000), 1+rng.IntN(9), rng.IntN(500), rng.IntN(100), []string{"standard", "reduced", "zero"}[rng.IntN(3)])
	}
	fmt.Fprintf(&b, `],"shipping":{"carrier":"%s","service_level":"%s","remarks":"%s, %s"},"payment":{"method":"%s","captured":%t}}`,
		[]string{"DHL", "DPD", "GLS", "UPS", "Hermes"}[rng.IntN(5)], []string{"standard", "next-day", "same-day"}[rng.IntN(3)],
		words[rng.IntN(len(words))], words[rng.IntN(len(words))], []string{"card", "paypal", "invoice", "sepa"}[rng.IntN(4)], rng.IntN(2) == 0)
	return []byte(b.String())
}

func orderRecords(topic string, first, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		j := first + i
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%04d", j%700), Value: orderJSON(j)}
	}
	return recs
}

// TestZstdRetrainOnDrift: when the topic's values change shape, the ratio
// the current dictionary achieves drifts past its baseline and korvet
// trains the next version by itself; records written with version 1 and
// version 2 read back byte for byte through Fetch and the KV view, before
// and after a restart (which loads both versions from Redis).
func TestZstdRetrainOnDrift(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Index: engine.IndexOptions{Dir: t.TempDir()}})
	createTopicWith(t, b, "zdrift", 1, map[string]string{"korvet.storage.compression": "zstd", "korvet.index.enable": "true"})
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	tp := b.eng.Topic("zdrift")
	var all []*kgo.Record
	produce := func(recs []*kgo.Record) {
		for i := 0; i < len(recs); i += 500 {
			produceAll(t, cl, recs[i:min(i+500, len(recs))])
		}
		all = append(all, recs...)
	}

	produce(sensorRecords("zdrift", 0, 2000))
	testbed.WaitFor(t, 60*time.Second, "dictionary version 1", func() bool { return tp.ZstdDictVersion() >= 1 })
	// Over a window (1 MiB) of sensor documents with version 1: its baseline.
	produce(sensorRecords("zdrift", 2000, 2000))
	testbed.WaitFor(t, 60*time.Second, "a baseline ratio for version 1", func() bool {
		v, base, _ := tp.ZstdRatio()
		return v == 1 && base > 0
	})
	if v, base, last := tp.ZstdRatio(); v != 1 {
		t.Fatalf("sensor documents alone retrained the dictionary: version %d (baseline %.2f, last %.2f)", v, base, last)
	}
	drifted := len(all)
	produce(orderRecords("zdrift", 0, 3000))
	testbed.WaitFor(t, 90*time.Second, "dictionary version 2 after the drift", func() bool { return tp.ZstdDictVersion() >= 2 })
	if v := tp.ZstdDictVersion(); v != 2 {
		t.Fatalf("dictionary version %d after one drift, want 2", v)
	}
	v2from := len(all)
	produce(orderRecords("zdrift", 3000, 500))

	forms := valueForms(t, b, "zdrift", 0)
	if forms["__zstd.1"] < 2000 || forms["__zstd.2"] < 500 {
		t.Fatalf("value forms %v: want at least 2000 entries with version 1 and 500 with version 2", forms)
	}
	if f := valueForms(t, b, "zdrift", int64(v2from)); f["__zstd.2"] != 500 {
		t.Fatalf("records after the retraining: value forms %v, want all 500 in __zstd.2", f)
	}
	_, base, last := tp.ZstdRatio()
	t.Logf("drift at offset %d; version 2 from offset %d; forms %v; version 2 ratio baseline %.2f, last %.2f", drifted, v2from, forms, base, last)

	check := func(when string) {
		checkConsumed(t, all, consumeAll(t, b, "zdrift", len(all)))
		for k, want := range latestByKey(all) {
			got, err := b.eng.KV().Get(ctxT(t, 10*time.Second), "zdrift", []byte(k))
			if err != nil || !bytes.Equal(got.Value, want.Value) || got.Offset != want.Offset {
				t.Fatalf("%s: KV get %s: offset %d (want %d), value equal %v, %v", when, k, got.Offset, want.Offset, bytes.Equal(got.Value, want.Value), err)
			}
		}
	}
	check("before a restart")
	b.restart()
	check("after a restart")
}
