package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/korvet/korvet/engine/entry"
)

// Retraining when the ratio drifts: a dictionary trained on last month's
// values compresses this month's worse once their shape changes. The
// producers' goroutines count the value bytes offered to the current
// dictionary and the bytes stored for them (entry.Compressor.Observe); the
// dictionary loop turns each zstdDriftWindow of them into a sample of the
// ratio stored/value. The first sample after a version comes into use on
// this broker is its baseline; a later one over zstdDriftFactor times the
// baseline trains the next version from the newest values. A version is
// kept only if it stores those values in at most zstdRetrainGain of what
// the current one needs; otherwise the drifted ratio becomes the baseline,
// so a topic whose values simply compress worse now is not retrained over
// and over. Old versions stay in Redis while the topic exists, so entries
// written with them stay readable.
const (
	zstdDriftWindow = 1 << 20
	zstdDriftFactor = 1.25
	zstdRetrainGain = 0.9
)

// zstdRatio is what the dictionary loop knows of the current version's
// ratio.
type zstdRatio struct {
	version  uint32  // the version baseline and last belong to
	baseline float64 // stored/value bytes of its first sample; 0: none yet
	last     float64 // of the latest sample
}

// errNoGain: a retrained dictionary would not store the newest values in
// noticeably fewer bytes than the current one.
var errNoGain = errors.New("a new zstd dictionary would not compress better")

// noteCompressed wakes the dictionary loop (at most once a second) once c
// has counted a window's worth of values to sample.
func (t *Topic) noteCompressed(c *entry.Compressor) {
	if c == nil || c.Version() == 0 || c.Pending() < zstdDriftWindow {
		return
	}
	if now := nowMillis(); now-t.z.woke.Load() >= 1000 {
		t.z.woke.Store(now)
		t.e.wakeZstd()
	}
}

// ZstdRatio reports the dictionary version new values of the topic use on
// this broker, and the ratio of stored to value bytes of the first sample
// taken with it (its baseline; 0 until sampled) and of the latest.
func (t *Topic) ZstdRatio() (version uint32, baseline, last float64) {
	t.z.ratioMu.Lock()
	defer t.z.ratioMu.Unlock()
	if v := t.ZstdDictVersion(); v != t.z.ratio.version {
		return v, 0, 0
	}
	return t.z.ratio.version, t.z.ratio.baseline, t.z.ratio.last
}

// checkDrift takes a sample of the current version's ratio when a window
// of values is in, and retrains when it drifted (see above).
func (t *Topic) checkDrift(ctx context.Context) error {
	c := t.z.cur.Load()
	if c == nil {
		return nil
	}
	in, out := c.Observed()
	if in < zstdDriftWindow {
		c.Observe(int(in), int(out)) // not a full window yet: give it back
		return nil
	}
	ratio := float64(out) / float64(in)
	t.z.ratioMu.Lock()
	r := &t.z.ratio
	if r.version != c.Version() {
		*r = zstdRatio{version: c.Version()}
	}
	r.last = ratio
	if r.baseline == 0 {
		r.baseline = ratio
	}
	base := r.baseline
	t.z.ratioMu.Unlock()
	if ratio <= base*zstdDriftFactor {
		return nil
	}
	t.e.log.Info("zstd ratio drifted, retraining", "topic", t.name, "version", c.Version(), "baseline", round2(base), "ratio", round2(ratio))
	v, err := t.trainDict(ctx, zstdMinSample/2, c, zstdRetrainGain)
	if errors.Is(err, errSuperseded) {
		return t.useDict(v)
	}
	if errors.Is(err, errNoGain) || errors.Is(err, errSampleSmall) {
		t.z.ratioMu.Lock()
		if t.z.ratio.version == c.Version() {
			t.z.ratio.baseline = ratio // the new normal
		}
		t.z.ratioMu.Unlock()
		t.e.log.Info("zstd dictionary kept", "topic", t.name, "version", c.Version(), "reason", err)
		return nil
	}
	return err
}

// storedBytes is what c stores sample in, values shorter than min whole.
func storedBytes(c *entry.Compressor, sample [][]byte, min int) (int, error) {
	var buf []byte
	n := 0
	for _, v := range sample {
		if len(v) < min {
			n += len(v)
			continue
		}
		var ok bool
		if buf, ok = c.Compress(buf[:0], v); ok {
			n += len(buf)
		} else {
			n += len(v)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: empty sample", errSampleSmall)
	}
	return n, nil
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }
