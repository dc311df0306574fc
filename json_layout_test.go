package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// pyProduce is run by Debian's python3: it produces documents the way a
// homelab script would, json.dumps with its default separators and with
// indent=2, and prints each key and exact value (base64) it sent.
const pyProduce = `
import base64, json, sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "compression.type": "none"})
doc = {"id": "sensor-7", "ts": 1700000000123, "device": {"model": "THS-101", "fw": "2.1.0"},
       "readings": {"temp_c": 21.5, "humidity": 40.2, "co2": 612}, "tags": ["indoor", "zone-2"], "ok": True, "note": None}
for key, value in (("py-default", json.dumps(doc)), ("py-indent", json.dumps(doc, indent=2) + "\n"),
                   ("py-unicode", json.dumps({"name": "Zoë", "emoji": "🌡", "n": 1}, ensure_ascii=False))):
    p.produce("sensors", key=key, value=value.encode())
    print(key, base64.b64encode(value.encode()).decode())
if p.flush(30) != 0:
    sys.exit("not all records were delivered")
`

// TestJSONWhitespaceEndToEnd produces JSON with whitespace outside member
// values (Python's json.dumps styles, CRLF, tabs, irregular spacing) to a
// real korvet with franz-go and, when installed, python3-confluent-kafka;
// checks in Redis that they are stored flattened with a __ws marker; and
// reads every value back byte for byte through a Kafka fetch and the KV
// view.
func TestJSONWhitespaceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := testbed.StartRedis(t)
	p := startKorvetOn(t, r, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), kgo.DefaultProduceTopic("sensors"),
		kgo.ConsumeTopics("sensors"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": ptr("compact")}, "sensors"); err != nil {
		t.Fatal(err)
	}

	// key -> value and the __ws marker it must be stored with; whole
	// values go to __value.
	type doc struct {
		value, ws string
		whole     bool
	}
	want := map[string]doc{
		"default":  {`{"id": "s-1", "readings": {"temp": 21.5, "rh": 40}, "tags": ["a", "b"]}`, "u . ", false},
		"indent":   {"{\n  \"id\": \"s-1\",\n  \"readings\": {\n    \"temp\": 21.5\n  }\n}\n", "u .\n  .\n  .\n.\n", false},
		"crlf":     {"{\r\n\t\"id\": \"s-1\",\r\n\t\"n\": 2\r\n}\r\n", "u .\r\n\t.\r\n\t.\r\n.\r\n", false},
		"mixed":    {` {"id" :"s-1",  "n":2 }`, "g .. ...  ... .", false},
		"compact":  {`{"id":"s-1","n":2}`, "", false}, // flattened, no __ws
		"nbsp":     {"{\"id\":\u00a0\"s-1\"}", "", true},
		"not json": {"{\"id\": s-1}", "", true},
	}
	var batch []*kgo.Record
	for k, d := range want {
		batch = append(batch, &kgo.Record{Key: []byte(k), Value: []byte(d.value)})
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if haveClient(t, "python3-confluent-kafka", "python3-confluent-kafka", "/usr/bin/python3", "-c", "import confluent_kafka") {
		out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", pyProduce, p.kafkaAddr).CombinedOutput()
		if err != nil {
			t.Fatalf("python producer: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			key, b64, _ := strings.Cut(line, " ")
			v, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("python producer printed %q: %v", line, err)
			}
			// json.dumps' separators around every member, the same markers.
			ws := map[string]string{"py-default": "u . ", "py-indent": "u .\n  .\n  .\n.\n", "py-unicode": "u . "}[key]
			want[key] = doc{value: string(v), ws: ws}
		}
	}

	// Stored as designed: the marker, or the whole value.
	rc, err := resp.New(r.URL, resp.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rep, err := rc.Do(ctx, "XRANGE", "korvet:storage:local:sensors:0:0", "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	entries := rep.Elems(nil)
	if len(entries) != len(want) {
		t.Fatalf("%d stream entries, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		fields := e.Elems(nil)[1].Elems(nil)
		var key, ws string
		hasValue := false
		for i := 0; i+1 < len(fields); i += 2 {
			switch string(fields[i].Bytes()) {
			case "__key":
				key = string(fields[i+1].Bytes())
			case "__ws":
				ws = string(fields[i+1].Bytes())
			case "__value":
				hasValue = true
			}
		}
		if d := want[key]; ws != d.ws || hasValue != d.whole {
			t.Errorf("key %q stored with __ws %q and __value %v, want __ws %q and __value %v", key, ws, hasValue, d.ws, d.whole)
		}
	}

	// A Kafka fetch gives every value back exactly.
	got := map[string][]byte{}
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("fetched %d of %d records: %v", len(got), len(want), err)
		}
		fs.EachError(func(tp string, part int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, part, err) })
		fs.EachRecord(func(rec *kgo.Record) { got[string(rec.Key)] = rec.Value })
	}
	for k, d := range want {
		if !bytes.Equal(got[k], []byte(d.value)) {
			t.Errorf("fetch of %q: %q, want %q", k, got[k], d.value)
		}
	}

	// And so does the KV view.
	hc := &http.Client{Timeout: 5 * time.Second}
	for k, d := range want {
		url := p.httpBase + "/v1/kv/sensors/" + strings.ReplaceAll(k, " ", "%20")
		waitStatus(t, url, http.StatusOK, 30*time.Second)
		code, body, err := httpGet(hc, url)
		if err != nil || code != http.StatusOK || !bytes.Equal(body, []byte(d.value)) {
			t.Errorf("GET %s: %d %q %v, want %q", url, code, body, err, d.value)
		}
	}
	t.Logf("%d values back byte-exact through fetch and KV: %s", len(want), fmt.Sprint(keysOf(want)))
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
