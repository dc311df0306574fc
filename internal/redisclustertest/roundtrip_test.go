package redisclustertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// rtPartitions is the partition count of the round-trip topic.
const rtPartitions = 4

// genRecords makes n records for the partitions in turn, with binary keys
// and values (every byte but kcat's delimiters 0x1e and 0x1f: NUL, \n,
// 0xff, ...), a null key now and then, and two headers each, one binary
// but for NUL, ',' and '\n' (kcat prints headers as C strings,
// name=value,...); source
// names the client that produces them. Given fixed, every record carries
// those headers and a key (kcat sets the same headers on every record).
func genRecords(seed uint64, n int, source string, fixed []kgo.RecordHeader) []record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	binNot := func(size int, not string) []byte {
		b := make([]byte, size)
		for i := range b {
			for {
				b[i] = byte(rng.UintN(256))
				if strings.IndexByte(not, b[i]) < 0 {
					break
				}
			}
		}
		return b
	}
	bin := func(size int) []byte { return binNot(size, "\x1e\x1f") }
	out := make([]record, n)
	for i := range out {
		r := record{Partition: int32(i % rtPartitions)}
		if i%7 != 3 || fixed != nil { // kcat cannot send a null key
			r.Key = append(fmt.Appendf(nil, "%s-%d-", source, i), bin(1+rng.IntN(16))...)
		}
		size := 1 + rng.IntN(600)
		if i%25 == 0 {
			size = 20_000 + rng.IntN(20_000) // some larger ones
		}
		r.Value = bin(size)
		if fixed != nil {
			r.Headers = fixed
		} else {
			r.Headers = []kgo.RecordHeader{{Key: "source", Value: []byte(source)}, {Key: "bin", Value: binNot(1+rng.IntN(8), "\x00,\n")}}
		}
		out[i] = r
	}
	return out
}

// TestRoundTripClients: franz-go, kcat and Debian's python3-confluent-kafka
// (librdkafka) each produce binary records with keys and headers to a
// 4-partition topic on the Redis Cluster; franz-go, kcat and python then
// each read the whole topic back: the same bytes (keys, values, headers),
// the same order per partition, every record once.
func TestRoundTripClients(t *testing.T) {
	needRedisCluster(t)
	testbed.NeedClient(t, "kcat", "kcat", "-V")
	const py = "/usr/bin/python3"
	testbed.NeedClient(t, "python3-confluent-kafka", py, "-c", "import confluent_kafka")
	roundTrip(t, startEnv(t, 1, ""))
}

func roundTrip(t *testing.T, e *env) {
	const py = "/usr/bin/python3"
	const topic = "roundtrip"
	e.createTopic(topic, rtPartitions, nil)
	bootstrap := e.brokers[0].KafkaAddr

	// franz-go: idempotent acks=all, synchronously, so the order per
	// partition is the order produced.
	fromKgo := genRecords(1, 200, "kgo", nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	krs := make([]*kgo.Record, len(fromKgo))
	for i, r := range fromKgo {
		krs[i] = &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}

	// kcat: one run per partition, records split by 0x1e, key and value
	// by 0x1f.
	kcatHeaders := []kgo.RecordHeader{{Key: "source", Value: []byte("kcat")}, {Key: "h2", Value: []byte("v=2")}}
	fromKcat := genRecords(2, 200, "kcat", kcatHeaders)
	for p := range int32(rtPartitions) {
		var in bytes.Buffer
		for _, r := range fromKcat {
			if r.Partition == p {
				in.Write(r.Key)
				in.WriteByte(0x1f)
				in.Write(r.Value)
				in.WriteByte(0x1e)
			}
		}
		testbed.RunCmd(t, 60*time.Second, in.Bytes(), "kcat", "-b", bootstrap, "-P", "-t", topic, "-p", strconv.Itoa(int(p)),
			"-D", `\x1e`, "-K", `\x1f`, "-H", "source=kcat", "-H", "h2=v=2",
			"-X", "enable.idempotence=true")
	}

	// python: records as JSON lines (hex) on stdin.
	fromPy := genRecords(3, 200, "python", nil)
	script, err := filepath.Abs("testdata/roundtrip.py")
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, r := range fromPy {
		in.Write(jsonRecord(t, r))
		in.WriteByte('\n')
	}
	out := testbed.RunCmd(t, 60*time.Second, in.Bytes(), py, script, "produce", bootstrap, topic)
	if n := strings.Count(out, "acked "); n != len(fromPy) {
		t.Fatalf("python acknowledged %d of %d records:\n%s", n, len(fromPy), out)
	}

	want := append(append(append([]record(nil), fromKgo...), fromKcat...), fromPy...)

	t.Run("franz-go", func(t *testing.T) {
		checkRecords(t, "franz-go", asRecords(kafkaload.ReadAll(t, e.seeds(), e.adm, topic, 60*time.Second)), want)
	})
	t.Run("python", func(t *testing.T) {
		out := testbed.RunCmd(t, 60*time.Second, nil, py, script, "consume", bootstrap, topic, strconv.Itoa(rtPartitions), strconv.Itoa(len(want)))
		var got []record
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			got = append(got, parseJSONRecord(t, sc.Bytes()))
		}
		checkRecords(t, "python", got, want)
	})
	t.Run("kcat", func(t *testing.T) {
		// %K/%S give the key's and value's lengths, so binary bytes
		// are read exactly; the headers are text.
		out := testbed.RunCmd(t, 60*time.Second, nil, "kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
			"-f", `%p %o %K %S %k%s %h\n`)
		checkRecords(t, "kcat", parseKcat(t, []byte(out)), want)
	})
}

// jsonRec is a record as the python client reads and writes it: bytes
// as hex, a null key as null.
type jsonRec struct {
	P int32       `json:"p"`
	O int64       `json:"o"`
	K *string     `json:"k"`
	V string      `json:"v"`
	H [][2]string `json:"h"`
}

func jsonRecord(t *testing.T, r record) []byte {
	j := jsonRec{P: r.Partition, V: hex.EncodeToString(r.Value), H: [][2]string{}}
	if r.Key != nil {
		k := hex.EncodeToString(r.Key)
		j.K = &k
	}
	for _, h := range r.Headers {
		j.H = append(j.H, [2]string{h.Key, hex.EncodeToString(h.Value)})
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseJSONRecord(t *testing.T, line []byte) record {
	t.Helper()
	var j jsonRec
	if err := json.Unmarshal(line, &j); err != nil {
		t.Fatalf("python printed %q: %v", line, err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("python printed %q: %v", line, err)
		}
		return b
	}
	r := record{Partition: j.P, Value: unhex(j.V)}
	if j.K != nil {
		r.Key = unhex(*j.K)
		if r.Key == nil {
			r.Key = []byte{}
		}
	}
	for _, h := range j.H {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: unhex(h[1])})
	}
	return r
}

// parseKcat reads kcat's "%p %o %K %S %k%s %h\n" output: key and value
// are read by their lengths (-1: null), headers are name=value,...
func parseKcat(t *testing.T, out []byte) []record {
	t.Helper()
	var recs []record
	field := func() int {
		i := bytes.IndexByte(out, ' ')
		if i < 0 {
			t.Fatalf("kcat output ends in the middle of a record: %q", trim(out))
		}
		n, err := strconv.Atoi(string(out[:i]))
		if err != nil {
			t.Fatalf("kcat printed %q where a number belongs", trim(out))
		}
		out = out[i+1:]
		return n
	}
	take := func(n int) []byte {
		if n < 0 {
			return nil
		}
		if n > len(out) {
			t.Fatalf("kcat output ends in the middle of a record")
		}
		b := bytes.Clone(out[:n])
		if b == nil {
			b = []byte{}
		}
		out = out[n:]
		return b
	}
	for len(out) > 0 {
		p := field()
		field() // offset: order is checked by position
		klen, vlen := field(), field()
		r := record{Partition: int32(p), Key: take(klen), Value: take(vlen)}
		if len(out) == 0 || out[0] != ' ' {
			t.Fatalf("kcat: no space after the value of a record in partition %d", p)
		}
		out = out[1:]
		i := bytes.IndexByte(out, '\n')
		if i < 0 {
			t.Fatal("kcat: a record without its newline")
		}
		if hs := string(out[:i]); hs != "" {
			for _, h := range strings.Split(hs, ",") {
				name, value, _ := strings.Cut(h, "=")
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
			}
		}
		out = out[i+1:]
		recs = append(recs, r)
	}
	return recs
}
