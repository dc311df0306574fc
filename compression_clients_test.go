package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/resp"
)

// TestLibrdkafkaCompressionCodecs: kcat and python3-confluent-kafka
// (librdkafka; 2.0.2 in Debian 12) produce with gzip, snappy, lz4 and zstd,
// and korvet receives the batches compressed as asked: the stored entry
// IDs are <offset>-<1+codec>. With Produce advertised from v3, librdkafka
// up to 2.11.0 sent gzip, snappy and lz4 uncompressed, silently (see
// kafkawire's apiTable). A consume by the same client returns the values
// byte-exact.
func TestLibrdkafkaCompressionCodecs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kcat and confluent-kafka against the binary")
	}
	haveKcat, havePython := librdkafkaClients(t)
	p := startKorvet(t, "")
	rc := redisClient(t, p.redis)

	codecs := []struct {
		name string
		id   int // Kafka's attribute bits
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}
	var matrix []string
	for _, client := range []string{"kcat", "confluent-kafka"} {
		for _, codec := range codecs {
			t.Run(client+"/"+codec.name, func(t *testing.T) {
				if client == "kcat" && !haveKcat || client == "confluent-kafka" && !havePython {
					t.Skipf("%s is not installed", client)
				}
				topic := "codec-" + client + "-" + codec.name
				values := compressibleValues(t, 5)
				var got [][]byte
				if client == "kcat" {
					got = kcatCodecRoundTrip(t, p.kafkaAddr, topic, codec.name, values)
				} else {
					got = confluentCodecRoundTrip(t, p.kafkaAddr, topic, codec.name, values)
				}

				ids := streamIDs(t, rc, "korvet:storage:local:"+topic+":0:0")
				suffixes := map[string]bool{}
				for _, id := range ids {
					suffixes[id[strings.IndexByte(id, '-'):]] = true
				}
				matrix = append(matrix, fmt.Sprintf("%s %s: %v", client, codec.name, keys(suffixes)))
				if len(ids) != len(values) {
					t.Fatalf("%d entries stored, want %d: %v", len(ids), len(values), ids)
				}
				for i, id := range ids {
					if want := fmt.Sprintf("%d-%d", i, 1+codec.id); id != want {
						t.Errorf("entry %d has ID %s, want %s (%s as sent; -1 is uncompressed)", i, id, want, codec.name)
					}
				}
				if len(got) != len(values) {
					t.Fatalf("consumed %d values, want %d", len(got), len(values))
				}
				for i := range values {
					if !bytes.Equal(got[i], values[i]) {
						t.Errorf("value %d came back as %d bytes %x..., want %d bytes %x...", i, len(got[i]), head(got[i]), len(values[i]), head(values[i]))
					}
				}
			})
		}
	}
	t.Logf("stored entry ID suffix per client and codec:\n  %s", strings.Join(matrix, "\n  "))
}

// compressibleValues are n values of random bytes (any but '\n', kcat's
// delimiter) and a repeated tail, so that every codec shrinks them:
// librdkafka sends a batch uncompressed when compressing does not help.
func compressibleValues(t *testing.T, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 64)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte{'\n'}, []byte{0})
		out[i] = append(append(b, 0, '\r', 0xff), bytes.Repeat([]byte("korvet compresses "), 100)...)
	}
	return out
}

// kcatCodecRoundTrip produces values with kcat -z codec, in one batch,
// and consumes them back.
func kcatCodecRoundTrip(t *testing.T, addr, topic, codec string, values [][]byte) [][]byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values")
	if err := os.WriteFile(file, append(bytes.Join(values, []byte{'\n'}), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-b", addr, "-t", topic, "-p", "0", "-X", "socket.timeout.ms=20000"}
	if _, errOut, err := runClient(t, time.Minute, "kcat", append(common, "-P", "-z", codec, "-X", "linger.ms=100", "-l", file)...); err != nil {
		t.Fatalf("kcat produce -z %s: %v\n%s", codec, err, errOut)
	}
	out, errOut, err := runClient(t, time.Minute, "kcat", append(common, "-C", "-o", "beginning", "-c", fmt.Sprint(len(values)), "-e", "-f", "%s\n")...)
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, errOut)
	}
	return bytes.Split(bytes.TrimSuffix(out, []byte{'\n'}), []byte{'\n'})
}

// confluentCodecRoundTrip does the same with confluent-kafka's
// compression.type.
func confluentCodecRoundTrip(t *testing.T, addr, topic, codec string, values [][]byte) [][]byte {
	t.Helper()
	args := []string{"testdata/confluent_codec.py", addr, topic, codec}
	for _, v := range values {
		args = append(args, hex.EncodeToString(v))
	}
	out, errOut, err := runClient(t, 2*time.Minute, "/usr/bin/python3", args...)
	if err != nil {
		t.Fatalf("confluent-kafka with compression.type %s: %v\nstdout:\n%s\nstderr:\n%s", codec, err, out, errOut)
	}
	var got [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		h, ok := strings.CutPrefix(line, "value ")
		v, err := hex.DecodeString(h)
		if !ok || err != nil {
			t.Fatalf("confluent-kafka printed %q", line)
		}
		got = append(got, v)
	}
	return got
}

// streamIDs lists the entry IDs of a Redis stream.
func streamIDs(t *testing.T, rc *resp.Client, key string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := rc.Do(ctx, "XRANGE", key, "-", "+")
	if err != nil {
		t.Fatalf("XRANGE %s: %v", key, err)
	}
	var ids []string
	for _, e := range r.Elems(nil) {
		ids = append(ids, string(e.Elems(nil)[0].Bytes()))
	}
	return ids
}

// keys lists a set's members.
func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
