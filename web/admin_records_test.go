package web

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine/auth"
)

// A test record produced through the API is what a Kafka consumer reads;
// records produced with kgo are shown by GET .../records; delete-records
// moves the low watermark kadm sees.
func TestAdminRecords(t *testing.T) {
	e := startAdmin(t)
	ctx := ctxFor(t, 60*time.Second)
	if res := e.root("POST", "/api/v1/topics", map[string]any{"name": "events", "partitions": 2}); res.code != http.StatusCreated {
		t.Fatalf("create: %d %s", res.code, res.body)
	}

	// Produce through the API; a kgo consumer reads it back as sent.
	res := e.root("POST", "/api/v1/topics/events/records", map[string]any{"partition": 1, "key": "k1", "value": `{"n":1}`,
		"headers": []map[string]string{{"key": "h", "value": "hv"}}})
	if res.code != http.StatusCreated {
		t.Fatalf("produce: %d %s", res.code, res.body)
	}
	var produced struct{ Partition, Offset int64 }
	res.json(t, &produced)
	if produced.Partition != 1 || produced.Offset != 0 {
		t.Fatalf("produce answered %+v", produced)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafkaAt), kgo.SASL(scram.Auth{User: "root", Pass: rootPassword}.AsSha256Mechanism()),
		kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	got := fs.Records()
	if len(got) != 1 || string(got[0].Key) != "k1" || string(got[0].Value) != `{"n":1}` || got[0].Partition != 1 ||
		len(got[0].Headers) != 1 || got[0].Headers[0].Key != "h" || string(got[0].Headers[0].Value) != "hv" {
		t.Fatalf("kgo read %+v", got)
	}

	// Binary values go in as base64 and come back as base64.
	bin := []byte{0xff, 0x00, 0xfe}
	res = e.root("POST", "/api/v1/topics/events/records", map[string]any{"partition": 0, "value": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"})
	if res.code != http.StatusCreated {
		t.Fatalf("produce base64: %d %s", res.code, res.body)
	}
	// Records produced with kgo: text, a long one (cut) and a tombstone.
	long := "a" + strings.Repeat("é", 3000) // 6001 bytes: the cut at 4096 splits an é
	for _, r := range []*kgo.Record{
		{Topic: "events", Partition: 0, Value: []byte("plain text")},
		{Topic: "events", Partition: 0, Value: []byte(long)},
		{Topic: "events", Partition: 0, Key: []byte("gone"), Value: nil},
	} {
		r.Timestamp = time.Now()
		if err := e.produceSync(r); err != nil {
			t.Fatal(err)
		}
	}
	var recs struct{ Records []recordJSON }
	res = e.root("GET", "/api/v1/topics/events/records?partition=0&limit=10", nil)
	res.json(t, &recs)
	if res.code != http.StatusOK || len(recs.Records) != 4 {
		t.Fatalf("records of partition 0: %d %s", res.code, res.body)
	}
	r0, r1, r2, r3 := recs.Records[0], recs.Records[1], recs.Records[2], recs.Records[3]
	if r0.Value.Base64 == nil || *r0.Value.Base64 != base64.StdEncoding.EncodeToString(bin) || r0.Key != nil {
		t.Errorf("binary record: %+v", r0)
	}
	if r1.Value.Text == nil || *r1.Value.Text != "plain text" || r1.Value.Truncated {
		t.Errorf("text record: %+v", r1)
	}
	if r2.Value.Text == nil || !r2.Value.Truncated || r2.Value.Size != 6001 || len(*r2.Value.Text) != 4095 {
		t.Errorf("long record: size %d truncated %v text %d bytes", r2.Value.Size, r2.Value.Truncated, len(deref(r2.Value.Text)))
	}
	if !r3.Value.Null || r3.Key == nil || *r3.Key.Text != "gone" {
		t.Errorf("tombstone: %+v", r3)
	}
	// All partitions, limit 2: the newest two by time; JSON shown as JSON.
	res = e.root("GET", "/api/v1/topics/events/records?limit=2&max_value_bytes=100", nil)
	res.json(t, &recs)
	if len(recs.Records) != 2 || !recs.Records[1].Value.Null || !recs.Records[0].Value.Truncated || len(deref(recs.Records[0].Value.Text)) > 100 {
		t.Errorf("limit 2 over all partitions: %s", res.body)
	}
	res = e.root("GET", "/api/v1/topics/events/records?partition=1", nil)
	res.json(t, &recs)
	if len(recs.Records) != 1 || string(recs.Records[0].Value.JSON) != `{"n":1}` || recs.Records[0].Headers[0].Key != "h" {
		t.Errorf("JSON record: %s", res.body)
	}
	for _, q := range []string{"limit=0", "limit=101", "max_value_bytes=70000", "partition=x", "partition=9"} {
		res = e.root("GET", "/api/v1/topics/events/records?"+q, nil)
		if res.code != http.StatusBadRequest && res.code != http.StatusNotFound {
			t.Errorf("records?%s: %d %s", q, res.code, res.body)
		}
	}

	// Delete records before offset 2 of partition 0, and all of 1.
	res = e.root("POST", "/api/v1/topics/events/delete-records", map[string]any{"partitions": []map[string]int64{{"partition": 0, "before": 2}, {"partition": 1, "before": -1}}})
	if res.code != http.StatusOK {
		t.Fatalf("delete-records: %d %s", res.code, res.body)
	}
	var dr struct{ Partitions []lowWatermarkJSON }
	res.json(t, &dr)
	if len(dr.Partitions) != 2 || dr.Partitions[0].LowWatermark != 2 || dr.Partitions[1].LowWatermark != 1 {
		t.Fatalf("delete-records answered %s", res.body)
	}
	starts, err := e.adm.ListStartOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("events", 0); o.Offset != 2 {
		t.Errorf("kadm: start offset of events/0 = %d, want 2", o.Offset)
	}
	if o, _ := starts.Lookup("events", 1); o.Offset != 1 {
		t.Errorf("kadm: start offset of events/1 = %d, want 1", o.Offset)
	}
	res = e.root("POST", "/api/v1/topics/events/delete-records", map[string]any{"partitions": []map[string]int64{{"partition": 0, "before": 99}}})
	if code, _ := res.apiErr(t); res.code != http.StatusBadRequest || code != "offset_out_of_range" {
		t.Errorf("delete-records beyond the end: %d %s", res.code, res.body)
	}
	if lines := e.logs.lines("action=topic.delete_records", "principal=User:root", "outcome=ok"); len(lines) != 1 {
		t.Errorf("audit lines of delete-records: %q", lines)
	}
}

// Producing, reading and deleting records are refused without WRITE,
// READ and DELETE on the topic.
func TestAdminRecordsRefused(t *testing.T) {
	e := startAdmin(t)
	e.addUser("bob", "bob-pw")
	if res := e.root("POST", "/api/v1/topics", map[string]any{"name": "private", "partitions": 1}); res.code != http.StatusCreated {
		t.Fatalf("create: %d %s", res.code, res.body)
	}
	if res := e.root("POST", "/api/v1/topics/private/records", map[string]any{"value": "secret"}); res.code != http.StatusCreated {
		t.Fatalf("produce: %d %s", res.code, res.body)
	}
	// bob may see that the topic exists, nothing more.
	e.allow("User:bob", auth.ResTopic, "private", auth.OpDescribe)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/topics/private/records", map[string]any{"value": "from bob"}},
		{"GET", "/api/v1/topics/private/records", nil},
		{"POST", "/api/v1/topics/private/delete-records", map[string]any{"partitions": []map[string]int64{{"partition": 0, "before": -1}}}},
	} {
		res := e.as("bob", "bob-pw", c.method, c.path, c.body)
		if code, _ := res.apiErr(t); res.code != http.StatusForbidden || code != "topic_authorization_failed" || strings.Contains(string(res.body), "secret") {
			t.Errorf("bob %s %s: %d %s, want 403 topic_authorization_failed", c.method, c.path, res.code, res.body)
		}
	}
	// carol has no ACL at all: the same refusals, for a topic that
	// exists and for one that does not.
	e.addUser("carol", "carol-pw")
	for _, path := range []string{"/api/v1/topics/private/records", "/api/v1/topics/missing/records"} {
		for _, method := range []string{"GET", "POST"} {
			var body any
			if method == "POST" {
				body = map[string]any{"value": "x"}
			}
			res := e.as("carol", "carol-pw", method, path, body)
			if code, _ := res.apiErr(t); res.code != http.StatusForbidden || code != "topic_authorization_failed" {
				t.Errorf("carol %s %s: %d %s, want 403", method, path, res.code, res.body)
			}
		}
	}
	if hw := e.eng.Topic("private").Partition(0).HighWatermark(); hw != 1 {
		t.Errorf("high watermark %d after refused produce, want 1", hw)
	}
	if ls := e.eng.Topic("private").Partition(0).LogStart(); ls != 0 {
		t.Errorf("log start %d after refused delete-records, want 0", ls)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// produceSync produces r with a kgo client logged in as User:root.
func (e *adminEnv) produceSync(r *kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafkaAt), kgo.SASL(scram.Auth{User: "root", Pass: rootPassword}.AsSha256Mechanism()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctxFor(e.t, 30*time.Second), r).FirstErr()
}
