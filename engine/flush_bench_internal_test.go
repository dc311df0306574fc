package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine/record"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// BenchmarkCommitRound measures one flush round of 100 records of 100 B
// against a real Redis in three ways, in one run: "fenced", as korvet
// writes a round (WATCH + epoch check, then MULTI/EXEC); "multi", as it
// did before fencing (one MULTI/EXEC, no check); "script", the round
// inside a Lua script that checks the epoch first (the alternative
// measured and rejected). redis-µs/record is Redis's own CPU per record,
// which the noise of a busy box blurs less than the wall time.
//
//	go test -run '^$' -bench CommitRound -benchtime 3000x ./engine/
func BenchmarkCommitRound(b *testing.B) {
	r := testbed.StartRedis(b)
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	e, err := Open(ctx, rc, Options{Logger: testbed.Logger(), GroupInitialRebalanceDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := rc.Do(ctx, "SCRIPT", "LOAD", benchFenceScript); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	runs := 0
	for _, mode := range []string{"multi", "fenced", "script", "multi", "fenced", "script"} {
		b.Run(mode, func(b *testing.B) {
			runs++
			t, err := e.CreateTopic(ctx, fmt.Sprintf("bench-%s-%d", mode, runs), 1, nil, false)
			if err != nil {
				b.Fatal(err)
			}
			p := t.Partition(0)
			// A new partition is claimed by the control loop; a round
			// before that is refused as not the leader's.
			testbed.WaitFor(b, 10*time.Second, "the broker leads "+t.Name(), p.IsLeader)
			var tx txBuffers
			b.SetBytes(100 * 100)
			cpu0 := redisCPU(b, rc)
			b.ResetTimer()
			for range b.N {
				recs := make([]record.Record, 100)
				for i := range recs {
					recs[i] = record.Record{Timestamp: 1, Value: value}
				}
				pd := &Pending{recs: recs, prod: NoProducer, done: make(chan struct{}), size: 100 * 100}
				p.mu.Lock()
				fl := p.takeLockedFrom([]*Pending{pd})
				p.mu.Unlock()
				fl.plan(p.t.currentSettings(), time.Now())
				switch mode {
				case "fenced":
					tx.write(p, &fl)
					if err := p.commitRound(ctx, &tx, &fl); err != nil {
						b.Fatal(err)
					}
					continue
				case "multi":
					tx.write(p, &fl) // the same MULTI/EXEC, sent without the check
				case "script":
					tx.writeScript(p, &fl)
				}
				rs, err := rc.Exec(ctx, &tx.pl)
				if err != nil {
					b.Fatal(err)
				}
				if err := rs.At(rs.Len() - 1).Err(); err != nil {
					b.Fatal(err)
				}
				rs.Release()
				p.mu.Lock()
				p.next, p.bytes, p.maxTs, p.segMin, p.segMax = fl.st.next, fl.st.bytes, fl.st.maxTs, fl.st.segMin, fl.st.segMax
				p.segs, p.producers = fl.st.segs, fl.st.producers
				p.segsSaved = p.segsSaved || fl.st.segsChanged
				p.mu.Unlock()
			}
			b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric((redisCPU(b, rc)-cpu0)*1e6/float64(b.N*100), "redis-µs/record")
		})
	}
}

// benchFenceScript runs a round's commands if the epoch still holds.
// ARGV: epoch, node, then per command its argument count and arguments.
const benchFenceScript = `
local m = redis.call('HMGET', KEYS[1], 'leader', 'leader_epoch')
if m[1] ~= ARGV[2] or m[2] ~= ARGV[1] then return 0 end
local i, n = 3, #ARGV
while i <= n do
  local c = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + c))
  i = i + c + 1
end
return 1
`

// argCollector gathers a round's commands as benchFenceScript's ARGV.
type argCollector struct{ args []any }

func (a *argCollector) Array(n int)     { a.args = append(a.args, n) }
func (a *argCollector) String(s string) { a.args = append(a.args, s) }
func (a *argCollector) Bulk(b []byte)   { a.args = append(a.args, string(b)) }
func (a *argCollector) Cmd(args ...any) {
	a.Array(len(args))
	for _, v := range args {
		switch v := v.(type) {
		case string:
			a.String(v)
		case []byte:
			a.Bulk(v)
		default:
			a.args = append(a.args, fmt.Sprint(v))
		}
	}
}

// writeScript puts the round into one EVALSHA of benchFenceScript.
func (tx *txBuffers) writeScript(p *Partition, fl *flushRound) {
	var a argCollector
	tx.writeCmds(p, fl, &a)
	tx.pl.Reset()
	tx.pl.Cmd(append([]any{"EVALSHA", sha1Hex(benchFenceScript), 1, p.metaKey, fl.epoch, p.t.e.opts.NodeID}, a.args...)...)
}

// redisCPU is the user+system CPU seconds Redis has used.
func redisCPU(b *testing.B, rc *resp.Client) float64 {
	r, err := rc.Do(context.Background(), "INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(string(r.Bytes()), "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// takeLockedFrom is takeLocked for appends given directly.
func (p *Partition) takeLockedFrom(take []*Pending) flushRound {
	q := p.queue
	p.queue = take
	fl := p.takeLocked(false)
	p.queue = q
	return fl
}
