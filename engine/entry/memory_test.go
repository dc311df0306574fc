package entry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// sensorDoc is a ~700-byte sensor document as Python's json.dumps writes
// it by default (", " and ": " separators), nested fields included.
func sensorDoc(rng *rand.Rand, i int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id": "sensor-%05d", "ts": %d, "seq": %d, `, i%500, 1700000000000+int64(i)*1000, i)
	fmt.Fprintf(&b, `"device": {"model": "THS-%d", "firmware": "2.%d.%d", "location": {"site": "home", "room": "room-%d", "floor": %d}}, `,
		100+i%7, i%5, i%13, i%9, i%3)
	fmt.Fprintf(&b, `"readings": {"temperature_c": %.2f, "humidity_pct": %.1f, "pressure_hpa": %.2f, "co2_ppm": %d, "voc_index": %d, "pm2_5": %.1f, "pm10": %.1f, "lux": %d}, `,
		15+rng.Float64()*15, 30+rng.Float64()*40, 990+rng.Float64()*30, 400+rng.IntN(1200), rng.IntN(500), rng.Float64()*50, rng.Float64()*80, rng.IntN(20000))
	fmt.Fprintf(&b, `"battery": {"voltage": %.3f, "percent": %d, "charging": %v}, `, 3+rng.Float64(), rng.IntN(101), rng.IntN(2) == 1)
	fmt.Fprintf(&b, `"network": {"rssi_dbm": %d, "snr_db": %.1f, "gateway": "gw-%02d", "hops": %d}, `, -40-rng.IntN(60), rng.Float64()*20, i%4, 1+i%3)
	fmt.Fprintf(&b, `"tags": ["indoor", "zone-%d", "batch-%d", "calibrated"], "status": "%s", "alerts": [], `, i%6, i/1000, []string{"ok", "warn", "ok", "ok"}[i%4])
	fmt.Fprintf(&b, `"calibration": {"offset_c": %.2f, "gain": %.4f, "last": "2026-11-%02dT08:00:00Z"}, "uptime_s": %d, "note": null}`,
		rng.Float64()-0.5, 0.98+rng.Float64()*0.04, 1+i%28, rng.IntN(10000000))
	return []byte(b.String())
}

// TestRedisBytesPerSensorRecord measures what 10,000 Python-style JSON
// sensor documents cost in Redis (MEMORY USAGE of the stream / entries),
// stored whole in __value as before and flattened with __ws now, and
// checks that flattening with the layout marker is the smaller of the two.
func TestRedisBytesPerSensorRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a real redis-server")
	}
	r := testbed.StartRedis(t, "--appendonly", "no")
	rc, err := resp.New(r.URL, resp.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const n = 10000
	rng := rand.New(rand.NewPCG(18, 7))
	recs := make([]record.Record, n)
	valueBytes := 0
	for i := range recs {
		recs[i] = record.Record{Timestamp: 1700000000000 + int64(i), Key: []byte(fmt.Sprintf("sensor-%05d", i%500)), Value: sensorDoc(rng, i)}
		valueBytes += len(recs[i].Value)
	}
	// As the Encoder writes them, and as a korvet before __ws did: whole.
	var e entry.Encoder
	write := func(key string, raw, compact bool) {
		p := &resp.Pipeline{}
		for i := range recs {
			rec := recs[i]
			if compact {
				var c bytes.Buffer
				if err := json.Compact(&c, rec.Value); err != nil {
					t.Fatal(err)
				}
				rec.Value = c.Bytes()
			}
			if raw {
				// A leading byte that is not JSON keeps the value whole;
				// the field then holds the original bytes.
				rec.Value = append([]byte{0}, rec.Value...)
			}
			pairs := e.Prepare(&rec)
			p.Array(3 + 2*pairs)
			p.String("XADD")
			p.String(key)
			p.String(strconv.Itoa(i) + "-1")
			if raw {
				e.Append(&rawWriter{p: p})
			} else {
				e.Append(p)
			}
			if p.Len() == 500 || i == n-1 {
				reps, err := rc.Exec(ctx, p)
				if err != nil {
					t.Fatalf("XADD %s: %v", key, err)
				}
				for j := range reps.Len() {
					if err := reps.At(j).Err(); err != nil {
						t.Fatalf("XADD %s: %v", key, err)
					}
				}
				reps.Release()
				p.Reset()
			}
		}
	}
	write("raw", true, false)
	write("flat", false, false)
	write("compact", false, true) // for reference: the same documents compact

	// The flattened stream really holds __ws entries that read back exact.
	rep, err := rc.Do(ctx, "XRANGE", "flat", "-", "+", "COUNT", "1")
	if err != nil {
		t.Fatal(err)
	}
	fields := rep.Elems(nil)[0].Elems(nil)[1].Elems(nil)
	var d entry.Decoder
	d.Begin()
	sawWS := false
	for i := 0; i+1 < len(fields); i += 2 {
		sawWS = sawWS || string(fields[i].Bytes()) == "__ws"
		d.Field(fields[i].Bytes(), fields[i+1].Bytes())
	}
	var back record.Record
	if err := d.Finish(&back); err != nil || string(back.Value) != string(recs[0].Value) || !sawWS {
		t.Fatalf("first flattened entry (__ws %v): %q, %v", sawWS, back.Value, err)
	}

	usage := func(key string) float64 {
		rep, err := rc.Do(ctx, "MEMORY", "USAGE", key, "SAMPLES", "0")
		if err != nil {
			t.Fatal(err)
		}
		b, err := rep.Int()
		if err != nil {
			t.Fatal(err)
		}
		return float64(b) / n
	}
	avg := float64(valueBytes) / n
	raw, flat, compact := usage("raw"), usage("flat"), usage("compact")
	t.Logf("%d Python-style JSON documents of %.0f bytes on average: __value %.0f B/record (%.2fx), flattened with __ws %.0f B/record (%.2fx); "+
		"the same documents compacted, flattened: %.0f B/record",
		n, avg, raw-1, (raw-1)/avg, flat, flat/avg, compact) // raw's extra leading byte taken off
	if flat >= raw-1 {
		t.Fatalf("flattened with __ws (%.0f B/record) is not smaller than __value (%.0f B/record)", flat, raw-1)
	}
}

// rawWriter passes fields through, dropping the byte the test put in
// front of __value to keep it from being flattened.
type rawWriter struct {
	p     *resp.Pipeline
	strip bool
}

func (w *rawWriter) String(s string) {
	w.strip = s == "__value"
	w.p.String(s)
}

func (w *rawWriter) Bulk(b []byte) {
	if w.strip {
		b, w.strip = b[1:], false
	}
	w.p.Bulk(b)
}
