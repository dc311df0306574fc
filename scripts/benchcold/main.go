// Command benchcold measures the cold tier: archiving segments of records
// into Parquet files in an Iceberg table on an S3 endpoint (or a local
// warehouse), and reading them back as a cold fetch would.
//
//	go run ./scripts/benchcold -endpoint 127.0.0.1:7070 -access KEY -secret SECRET \
//	    -records 1000000 -size 100 -segment 7812 -streams 4
//
// Archive: -records records of -size value bytes (16-byte keys, no
// headers), cut into segments of -segment records and archived by -streams
// concurrent partitions, each uploading its segments one after the other
// and committing them behind (as korvet's archiving worker does); reports
// records/s and MB/s of record payload.
// Read: a fresh store (footer cache empty) reads every archived file from
// start to end in fetches of -fetch bytes, -streams files at a time.
// Prints "RESULT key=value ..." lines for scripts.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/korvet/korvet/cold"
	"github.com/korvet/korvet/engine/record"
)

func main() {
	var (
		cfg     cold.Config
		records = flag.Int("records", 1_000_000, "records to archive")
		size    = flag.Int("size", 100, "value bytes per record")
		segment = flag.Int("segment", 7812, "records per segment (7812: about 1 MiB of records in Redis)")
		streams = flag.Int("streams", 1, "partitions archived (and read) concurrently")
		chunk   = flag.Int("chunk", 10_000, "records handed to Archive per call of next")
		fetch   = flag.Int("fetch", 1<<20, "bytes per cold read (a fetch's partition max bytes)")
		topic   = flag.String("topic", fmt.Sprintf("bench-%d", time.Now().UnixNano()), "topic (table) name")
	)
	flag.StringVar(&cfg.Warehouse, "warehouse", "s3://korvet-bench/warehouse", "warehouse URI")
	flag.StringVar(&cfg.Endpoint, "endpoint", "", "S3 endpoint host:port (plain HTTP)")
	flag.StringVar(&cfg.AccessKey, "access", "", "S3 access key")
	flag.StringVar(&cfg.SecretKey, "secret", "", "S3 secret key")
	flag.IntVar(&cfg.RowGroupBytes, "row-group-bytes", 0, "record bytes per row group (0: default)")
	flag.IntVar(&cfg.PageBytes, "page-bytes", 0, "bytes at which a column's values are cut into a page (0: default)")
	flag.Parse()
	cfg.PathStyle = true
	if err := run(cfg, *topic, *records, *size, *segment, *streams, *chunk, *fetch); err != nil {
		fmt.Fprintln(os.Stderr, "benchcold:", err)
		os.Exit(1)
	}
}

func run(cfg cold.Config, topic string, records, size, segment, streams, chunk, fetch int) error {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cache, err := os.MkdirTemp("", "benchcold-cache")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	cfg.CacheDir = filepath.Join(cache, "a")
	s, err := cold.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer s.Close()

	// One chunk of records, reused: offsets and timestamps are rewritten
	// per chunk, so generating data costs nothing measurable.
	perStream := records / streams
	nseg := (perStream + segment - 1) / segment
	fmt.Printf("archive: %d records of %d B in segments of %d records, %d stream(s), chunks of %d\n",
		perStream*streams, size, segment, streams, chunk)
	var files []cold.DataFile
	var mu sync.Mutex
	var payload atomic.Int64
	start := time.Now()
	var wg, commits sync.WaitGroup
	errs := make(chan error, streams+nseg*streams)
	for p := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]record.Record, chunk)
			keys := make([]byte, 16*chunk)
			// Random values from a pool larger than a row group: zstd
			// cannot shrink them, as with real (already compact) payloads.
			pool := max(chunk, 1<<16)
			vals := make([]byte, size*pool+8)
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for i := 0; i+8 <= len(vals); i += 8 {
				binary.LittleEndian.PutUint64(vals[i:], rng.Uint64())
			}
			for i := range buf {
				buf[i].Key = keys[16*i : 16*i+16]
			}
			for sg := range nseg {
				base := int64(sg * segment)
				n := min(segment, perStream-sg*segment)
				left, off := n, base
				next := func() ([]record.Record, []record.Txn, error) {
					if left == 0 {
						return nil, nil, io.EOF
					}
					k := min(left, chunk)
					for i := range k {
						buf[i].Offset = off + int64(i)
						buf[i].Timestamp = 1_700_000_000_000 + buf[i].Offset
						binary.BigEndian.PutUint64(buf[i].Key[8:], uint64(buf[i].Offset))
						v := int(buf[i].Offset) % pool * size
						buf[i].Value = vals[v : v+size]
						payload.Add(int64(buf[i].Size()))
					}
					left -= k
					off += int64(k)
					return buf[:k], nil, nil
				}
				ref := cold.SegmentRef{Topic: topic, TopicID: [16]byte{1}, Partition: int32(p), Segment: int64(sg),
					BaseOffset: base, LastOffset: base + int64(n) - 1}
				// As korvet's archiving worker does: the next segment
				// uploads while this one waits for its commit.
				u, err := s.Upload(ctx, ref, next)
				if err != nil {
					errs <- err
					return
				}
				commits.Add(1)
				go func() {
					defer commits.Done()
					df, err := u.Commit(ctx)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					files = append(files, df)
					mu.Unlock()
				}()
			}
		}()
	}
	wg.Wait()
	commits.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	took := time.Since(start)
	var fileBytes int64
	for _, f := range files {
		fileBytes += f.Bytes
	}
	n := int64(perStream * streams)
	fmt.Printf("archive: %d records in %.2fs: %.0f records/s, %.1f MB/s of records; %d files, %.1f MB of Parquet (%.0f%%)\n",
		n, took.Seconds(), float64(n)/took.Seconds(), float64(payload.Load())/took.Seconds()/1e6,
		len(files), float64(fileBytes)/1e6, 100*float64(fileBytes)/float64(payload.Load()))
	fmt.Printf("RESULT phase=archive records=%d seconds=%.3f rps=%.0f mbps=%.1f files=%d parquet_bytes=%d\n",
		n, took.Seconds(), float64(n)/took.Seconds(), float64(payload.Load())/took.Seconds()/1e6, len(files), fileBytes)

	// Read back from a store with an empty footer cache, as after a
	// restart.
	cfg.CacheDir = filepath.Join(cache, "b")
	r, err := cold.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer r.Close()
	before := r.Stats()
	var read atomic.Int64
	var readBytes atomic.Int64
	start = time.Now()
	work := make(chan cold.DataFile, len(files))
	for _, f := range files {
		work <- f
	}
	close(work)
	errs = make(chan error, streams)
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				for from := f.MinOffset; from <= f.MaxOffset; {
					recs, _, err := r.Read(ctx, f, from, fetch)
					if err != nil {
						errs <- err
						return
					}
					if len(recs) == 0 {
						errs <- fmt.Errorf("%s: no records at %d", f.Path, from)
						return
					}
					for i := range recs {
						readBytes.Add(int64(recs[i].Size()))
					}
					read.Add(int64(len(recs)))
					from = recs[len(recs)-1].Offset + 1
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	took = time.Since(start)
	st := r.Stats()
	if read.Load() != n {
		return fmt.Errorf("read %d records, archived %d", read.Load(), n)
	}
	fmt.Printf("read: %d records in %.2fs: %.0f records/s, %.1f MB/s of records; %d GETs, %.1f MB fetched\n",
		read.Load(), took.Seconds(), float64(read.Load())/took.Seconds(), float64(readBytes.Load())/took.Seconds()/1e6,
		st.Gets-before.Gets, float64(st.GetBytes-before.GetBytes)/1e6)
	fmt.Printf("RESULT phase=read records=%d seconds=%.3f rps=%.0f mbps=%.1f gets=%d\n",
		read.Load(), took.Seconds(), float64(read.Load())/took.Seconds(), float64(readBytes.Load())/took.Seconds()/1e6, st.Gets-before.Gets)
	return nil
}
