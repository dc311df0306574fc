package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/korvet/korvet/engine/entry"
	"github.com/korvet/korvet/engine/zstdict"
)

// Compression at rest (korvet.storage.compression=zstd): the flush loop
// stores each value as one zstd frame (entry.Compressor) when that is
// smaller. Frames use the topic's current dictionary, trained in the
// background from the topic's own values and kept in Redis by version
// (keys.ZstdDicts); until one exists they use none (version 0). Readers
// load a version the first time an entry names it (entry.DictCache), so
// every broker reads what any broker wrote, and old versions stay.

const (
	// zstdLevel is the general encoder's (values over zstdict.MaxValue,
	// version 0, dictionaries from before zstdict.Tune): SpeedFastest,
	// measured against SpeedDefault on 700-byte
	// JSON with a trained dictionary (BenchmarkEncodeZstd): the same ratio
	// (0.25x) at about half the CPU per record; on the 1 KiB JSON of
	// scripts/bench-memory.sh SpeedDefault gives 0.418x (Fastest 0.414x)
	// at 3x the CPU, SpeedBetterCompression 0.420x at 4x.
	zstdLevel = zstd.SpeedFastest
	// A dictionary is trained from the newest values of the partitions
	// this broker leads: up to zstdSampleRecords or zstdSampleBytes, and
	// not before zstdMinSample records exist (fewer train a poor one).
	zstdSampleRecords = 2000
	zstdSampleBytes   = 2 << 20
	zstdMinSample     = 1000
	// zstdDictBytes: on the 1 KiB JSON of scripts/bench-memory.sh a frame
	// takes 0.414x the value with 16 KiB, 0.396x with 32 KiB, 0.388x with
	// 64 KiB (and 0.390x with 112 KiB from 8000 values), measured with
	// the general encoder; zstdict's match table indexes 64 KiB.
	zstdDictBytes = 64 << 10
	// zstdInterval is how often the dictionary loop looks at zstd topics:
	// to train a first dictionary, or pick up one another broker trained.
	zstdInterval = 10 * time.Second
)

// topicZstd is a topic's compression state.
type topicZstd struct {
	dicts *entry.DictCache
	plain atomic.Pointer[entry.Compressor] // version 0, made once
	cur   atomic.Pointer[entry.Compressor] // the newest version known
	woke  atomic.Int64                     // unix ms the flush loop last woke the dictionary loop
	// retuned is the untuned version this broker last tried to replace
	// with a tuned one (retuneDict), so that it tries once per version.
	retuned atomic.Uint32
	train   sync.Mutex // one training of the topic at a time

	ratioMu sync.Mutex
	ratio   zstdRatio // zstd_drift.go
}

func (t *Topic) initZstd() {
	t.z.dicts = entry.NewDictCache(t.loadDict)
}

// loadDict reads dictionary version v of the topic from Redis.
func (t *Topic) loadDict(v uint32) ([]byte, error) {
	ctx, cancel := context.WithTimeout(t.e.bg, 10*time.Second)
	defer cancel()
	r, err := t.e.rc.Do(ctx, "HGET", t.e.k.ZstdDicts(t.name), v)
	if err != nil {
		return nil, fmt.Errorf("topic %q: load zstd dictionary version %d: %w", t.name, v, err)
	}
	if r.IsNil() {
		return nil, fmt.Errorf("topic %q: %w: version %d is not in %s", t.name, entry.ErrNoDictionary, v, t.e.k.ZstdDicts(t.name))
	}
	return r.Bytes(), nil
}

// compressor is what the flush loop compresses the topic's values with:
// the newest dictionary this broker knows, else none. It never waits for
// Redis; the first call wakes the dictionary loop to look for one.
func (t *Topic) compressor() *entry.Compressor {
	if c := t.z.cur.Load(); c != nil {
		return c
	}
	// No dictionary yet: let the loop look (at most once a second) so the
	// first one comes as soon as enough values are in.
	if now := time.Now().UnixMilli(); now-t.z.woke.Load() >= 1000 {
		t.z.woke.Store(now)
		t.e.wakeZstd()
	}
	if c := t.z.plain.Load(); c != nil {
		return c
	}
	c, err := entry.NewCompressor(0, nil, zstdLevel)
	if err != nil {
		t.e.log.Error("zstd compressor", "topic", t.name, "err", err)
		return nil
	}
	if !t.z.plain.CompareAndSwap(nil, c) {
		return t.z.plain.Load() // another partition's flush loop made it first
	}
	return c
}

// compress compresses the append's values of at least min bytes on the
// caller's goroutine, so that the partition's flush loop, which runs one
// round at a time, only writes them; it counts what it stored for the
// topic's ratio sampling (zstd_drift.go).
func (pd *Pending) compress(c *entry.Compressor, min int) {
	if c == nil {
		return
	}
	pd.zc = c
	total := 0
	for i := range pd.recs {
		if v := pd.recs[i].Value; v != nil && len(v) >= min {
			total += len(v)
		}
	}
	if total == 0 {
		return // nothing to compress: frames stays nil
	}
	// JSON compresses to well under half: one arena usually suffices.
	arena := make([]byte, 0, total/2+256)
	var out int
	ends := make([]int, len(pd.recs))
	for i := range pd.recs {
		ends[i] = -1
		v := pd.recs[i].Value
		if v == nil || len(v) < min {
			continue
		}
		n := len(arena)
		var ok bool
		if arena, ok = c.Compress(arena, v); ok {
			ends[i] = len(arena)
			out += len(arena) - n
		} else {
			arena = arena[:n]
			out += len(v)
		}
	}
	c.Observe(total, out)
	pd.frames = make([][]byte, len(pd.recs))
	start := 0
	for i, end := range ends {
		if end >= 0 {
			pd.frames[i] = arena[start:end:end]
			start = end
		}
	}
}

// ZstdDictVersion returns the dictionary version new records of the
// topic are compressed with on this broker (0: none yet).
func (t *Topic) ZstdDictVersion() uint32 {
	if c := t.z.cur.Load(); c != nil {
		return c.Version()
	}
	return 0
}

// useDict makes version v (read from Redis) the topic's current one, if it
// is newer than what the topic uses.
func (t *Topic) useDict(v uint32) error {
	if v <= t.ZstdDictVersion() {
		return nil
	}
	d, err := t.loadDict(v)
	if err != nil {
		return err
	}
	c, err := entry.NewCompressor(v, d, zstdLevel)
	if err != nil {
		return fmt.Errorf("topic %q: %w", t.name, err)
	}
	for {
		old := t.z.cur.Load()
		if old != nil && old.Version() >= v {
			return nil
		}
		if t.z.cur.CompareAndSwap(old, c) {
			t.e.log.Info("zstd dictionary in use", "topic", t.name, "version", v, "bytes", len(d))
			return nil
		}
	}
}

// currentDict reads the topic's current dictionary version from Redis.
func (t *Topic) currentDict(ctx context.Context) (uint32, error) {
	r, err := t.e.rc.Do(ctx, "HGET", t.e.k.ZstdDicts(t.name), "current")
	if err != nil {
		return 0, fmt.Errorf("topic %q: current zstd dictionary: %w", t.name, err)
	}
	if r.IsNil() {
		return 0, nil
	}
	v, err := strconv.ParseUint(string(r.Bytes()), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("topic %q: current zstd dictionary %q: %w", t.name, r.Bytes(), err)
	}
	return uint32(v), nil
}

// errSuperseded: a retraining found the version it was to replace no
// longer current.
var errSuperseded = errors.New("the zstd dictionary was replaced meanwhile")

// errSampleSmall: not enough values to train a dictionary yet.
var errSampleSmall = errors.New("too few values to train a zstd dictionary")

// TrainZstdDict trains a new dictionary version for the topic from the
// newest values of the partitions this broker leads, stores it and uses
// it for new records; it returns the version. A topic that already has a
// dictionary gets a new version (the dictionary loop also retrains by
// itself when the ratio drifts: zstd_drift.go).
func (e *Engine) TrainZstdDict(ctx context.Context, topic string) (uint32, error) {
	t := e.Topic(topic)
	if t == nil {
		return 0, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	return t.trainDict(ctx, 8, nil, 0)
}

// trainDict trains the topic's next dictionary version from at least
// minSample values. With against set (a retraining), the new version is
// kept only if it stores the sample in at most gain of the bytes against
// needs; else the error is errNoGain.
func (t *Topic) trainDict(ctx context.Context, minSample int, against *entry.Compressor, gain float64) (uint32, error) {
	t.z.train.Lock()
	defer t.z.train.Unlock()
	cur, err := t.currentDict(ctx)
	if err != nil {
		return 0, err
	}
	if against != nil && cur != against.Version() {
		// Another pass, or another broker, replaced the version this
		// retraining was to replace while it waited for the lock.
		return cur, fmt.Errorf("topic %q: %w: version %d is current, not %d", t.name, errSuperseded, cur, against.Version())
	}
	sample, err := t.sampleValues(ctx)
	if err != nil {
		return 0, err
	}
	if len(sample) < minSample {
		return 0, fmt.Errorf("topic %q: %w (%d of %d)", t.name, errSampleSmall, len(sample), minSample)
	}
	v := cur + 1
	start := time.Now()
	d, err := buildDict(sample, v)
	if err != nil {
		return 0, fmt.Errorf("topic %q: train zstd dictionary from %d values: %w", t.name, len(sample), err)
	}
	// Check it compresses, and that what it compresses reads back,
	// before storing it: a version never changes.
	c, err := entry.NewCompressor(v, d, zstdLevel)
	if err != nil {
		return 0, fmt.Errorf("topic %q: trained dictionary: %w", t.name, err)
	}
	if err := readsBack(v, d, c, sample); err != nil {
		return 0, fmt.Errorf("topic %q: trained dictionary %d: %w", t.name, v, err)
	}
	if against != nil {
		min := t.currentSettings().zstdMin
		now, err := storedBytes(against, sample, min)
		if err != nil {
			return 0, err
		}
		next, err := storedBytes(c, sample, min)
		if err != nil {
			return 0, err
		}
		if float64(next) > gain*float64(now) {
			return 0, fmt.Errorf("topic %q: %w: %d bytes for %d values with version %d, %d with a new one", t.name, errNoGain, now, len(sample), against.Version(), next)
		}
	}
	key := t.e.k.ZstdDicts(t.name)
	r, err := t.e.rc.Do(ctx, "HSETNX", key, v, d)
	if err != nil {
		return 0, fmt.Errorf("topic %q: store zstd dictionary %d: %w", t.name, v, err)
	}
	if n, _ := r.Int(); n == 1 {
		// Ours: make it current unless another broker went further meanwhile.
		if _, err := t.e.rc.Do(ctx, "EVAL", raiseCurrentScript, 1, key, v); err != nil {
			return 0, fmt.Errorf("topic %q: set current zstd dictionary %d: %w", t.name, v, err)
		}
		t.e.log.Info("zstd dictionary trained", "topic", t.name, "version", v, "values", len(sample), "bytes", len(d), "took", time.Since(start).Round(time.Millisecond))
	}
	// Another broker's version v won the HSETNX: use that one.
	if v, err = t.currentDict(ctx); err != nil {
		return 0, err
	}
	if err := t.useDict(v); err != nil {
		return 0, err
	}
	return v, nil
}

// buildDict trains dictionary version v from sample: the trainer picks
// the content, and zstdict.Tune fits the entropy tables to the encoder
// that uses them for every frame (on the 700-byte JSON of
// scripts/bench-memory.sh the trainer's own tables give 0.35-0.38x from
// one training to the next, tuned ones 0.335x).
func buildDict(sample [][]byte, v uint32) ([]byte, error) {
	d, err := dict.BuildZstdDict(sample, dict.Options{MaxDictSize: zstdDictBytes, HashBytes: 8, ZstdDictID: v, ZstdLevel: zstdLevel})
	if err != nil {
		return nil, err
	}
	return zstdict.Tune(d, sample)
}

// readsBack compresses up to readBackValues of sample with c and checks
// that a decoder of dictionary version v gives each back byte for byte.
func readsBack(v uint32, dict []byte, c *entry.Compressor, sample [][]byte) error {
	dec, err := entry.NewDictDecoder(v, dict)
	if err != nil {
		return err
	}
	defer dec.Close()
	var frame, out []byte
	for i, val := range sample[:min(len(sample), readBackValues)] {
		var ok bool
		if frame, ok = c.Compress(frame[:0], val); !ok {
			continue
		}
		// The decoder stops at dst's capacity (WithDecodeAllCapLimit).
		if out, err = dec.DecodeAll(frame, slices.Grow(out[:0], len(val))); err != nil || !bytes.Equal(out, val) {
			return fmt.Errorf("value %d of the sample does not read back (%v): not stored", i, err)
		}
	}
	return nil
}

// readBackValues: how many sample values readsBack checks.
const readBackValues = 200

// raiseCurrentScript sets "current" to ARGV[1] unless it is higher already.
const raiseCurrentScript = `local c = tonumber(redis.call('HGET', KEYS[1], 'current') or '0')
if c < tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], 'current', ARGV[1]) end
return 1`

// sampleValues reads the newest non-null values of the partitions this
// broker leads, up to zstdSampleRecords and zstdSampleBytes in all.
func (t *Topic) sampleValues(ctx context.Context) ([][]byte, error) {
	var out [][]byte
	size := 0
	parts := t.Partitions()
	for _, p := range parts {
		if !p.IsLeader() {
			continue
		}
		want := int64(zstdSampleRecords / len(parts))
		from := max(p.LogStart(), p.HighWatermark()-max(want, 1))
		for from < p.HighWatermark() && len(out) < zstdSampleRecords && size < zstdSampleBytes {
			res, err := p.Read(ctx, from, 1<<20)
			if err != nil {
				if errors.Is(err, ErrOffsetOutOfRange) {
					break // trimmed meanwhile
				}
				return nil, fmt.Errorf("topic %q: sample values: %w", t.name, err)
			}
			if len(res.Records) == 0 {
				res.Release()
				break
			}
			for i := range res.Records {
				if v := res.Records[i].Value; len(v) > 0 && len(out) < zstdSampleRecords && size < zstdSampleBytes {
					out = append(out, append([]byte(nil), v...))
					size += len(v)
				}
			}
			from = res.Records[len(res.Records)-1].Offset + 1
			res.Release()
		}
	}
	return out, nil
}

// wakeZstd asks the dictionary loop for a pass now.
func (e *Engine) wakeZstd() {
	select {
	case e.zstdWake <- struct{}{}:
	default:
	}
}

// zstdLoop keeps the zstd topics' dictionaries: it picks up the current
// version from Redis, on a topic without one trains the first once
// enough values are there, and samples the ratio to retrain when it
// drifts (zstd_drift.go). Never on the produce path.
func (e *Engine) zstdLoop() {
	defer e.wg.Done()
	tick := time.NewTicker(zstdInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-tick.C:
		case <-e.zstdWake:
		}
		for _, t := range e.Topics() {
			if !t.currentSettings().zstd || !t.leadsAny() {
				continue
			}
			ctx, cancel := context.WithTimeout(e.bg, time.Minute)
			err := t.refreshDict(ctx)
			if err == nil {
				err = t.checkDrift(ctx)
			}
			if err != nil && !errors.Is(err, errSampleSmall) && e.bg.Err() == nil {
				e.log.Warn("zstd dictionary", "topic", t.name, "err", err)
			}
			cancel()
		}
	}
}

// refreshDict uses the topic's current dictionary, training the first.
func (t *Topic) refreshDict(ctx context.Context) error {
	v, err := t.currentDict(ctx)
	if err != nil {
		return err
	}
	if v > 0 {
		if err := t.useDict(v); err != nil {
			return err
		}
		return t.retuneDict(ctx)
	}
	var n int64
	for _, p := range t.Partitions() {
		if p.IsLeader() {
			n += p.HighWatermark() - p.LogStart()
		}
	}
	if n < zstdMinSample {
		return nil
	}
	_, err = t.trainDict(ctx, zstdMinSample/2, nil, 0)
	return err
}

// retuneDict replaces a current dictionary that an older korvet trained,
// whose tables were not tuned for the fast encoder (zstdict.Tune), so
// that every value goes through the general encoder at about three
// times the CPU. The new version is trained from the newest values, once
// per version and broker, and kept if it stores them in no more bytes.
func (t *Topic) retuneDict(ctx context.Context) error {
	c := t.z.cur.Load()
	if c == nil || c.Version() == 0 || c.Tuned() || t.z.retuned.Load() == c.Version() {
		return nil
	}
	v, err := t.trainDict(ctx, zstdMinSample/2, c, 1)
	switch {
	case errors.Is(err, errSampleSmall):
		return nil // again once more values are in
	case errors.Is(err, errSuperseded):
		return t.useDict(v)
	case errors.Is(err, errNoGain):
		t.z.retuned.Store(c.Version())
		t.e.log.Info("zstd dictionary kept untuned", "topic", t.name, "version", c.Version(), "reason", err)
		return nil
	case err != nil:
		return err
	}
	t.z.retuned.Store(c.Version())
	t.e.log.Info("zstd dictionary retuned for the fast encoder", "topic", t.name, "from", c.Version(), "version", v)
	return nil
}

// leadsAny reports whether this broker leads a partition of t.
func (t *Topic) leadsAny() bool {
	for _, p := range t.Partitions() {
		if p.IsLeader() {
			return true
		}
	}
	return false
}
