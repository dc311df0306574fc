package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// byteSize is a size in a config file: an integer of bytes, or a string
// with a unit ("256MiB", "1GiB", "64MB", "0").
type byteSize int64

// UnmarshalTOML takes both forms, so budget = 268435456 and
// budget = "256MiB" mean the same.
func (b *byteSize) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return fmt.Errorf("size %d is negative", v)
		}
		*b = byteSize(v)
		return nil
	case string:
		n, err := parseByteSize(v)
		if err != nil {
			return err
		}
		*b = byteSize(n)
		return nil
	default:
		return fmt.Errorf("want a size such as \"256MiB\" or a number of bytes, got %T", v)
	}
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1}, {"", 1},
}

// parseByteSize reads "256MiB", "1.5GiB", "64MB" or "1048576".
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			break
		}
		v := f * float64(u.mult)
		if v >= 1<<62 {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return int64(v), nil
	}
	return 0, fmt.Errorf("bad size %q (use e.g. \"256MiB\", \"1GiB\" or a number of bytes)", s)
}

// String prints the size the way the README writes it.
func (b byteSize) String() string {
	switch {
	case b == 0:
		return "0"
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return strconv.FormatInt(int64(b), 10)
}

const (
	// defaultMemoryBudget gives the caches the sizes korvet had before
	// there was a budget, and fits a 1 GiB Raspberry Pi next to its Redis.
	defaultMemoryBudget = 256 << 20
	// minMemoryBudget: below it the fixed costs (runtime, Redis pool,
	// Pebble memtables, the status page) alone exceed the budget.
	minMemoryBudget = 32 << 20
)

// memoryPlan is what [memory] budget gives each cache. The shares leave
// more than half of the budget to what is not a cache: requests in flight,
// Pebble's memtables, the Redis pool and the Go runtime.
type memoryPlan struct {
	budget int64 // 0: unlimited (no GOMEMLIMIT, no cap on fetch buffers)
	// indexCache is Pebble's block cache of the KV index (1/16).
	indexCache int64
	// rowGroups bounds the decoded Parquet row groups the cold tier keeps
	// for consumers reading on (1/4).
	rowGroups int
	// footers bounds the parsed Parquet footers kept in memory (1/8).
	footers int
	// inflight caps kafka.max_inflight_bytes, the fetch response bytes
	// one connection may have waiting (1/4).
	inflight int64
	// archive bounds what the archiving worker holds: segments read from
	// Redis and the files being written (1/8).
	archive int64
}

// memoryPlanFor splits a budget; 0 keeps the caches at the default
// budget's sizes and sets no limit.
func memoryPlanFor(budget int64, maxInflight int64) memoryPlan {
	b := budget
	if b == 0 {
		b = defaultMemoryBudget
	}
	p := memoryPlan{
		budget:     budget,
		indexCache: max(b/16, 1<<20),
		rowGroups:  int(max(b/4, 4<<20)),
		footers:    int(max(b/8, 2<<20)),
		inflight:   maxInflight,
		archive:    max(b/8, 4<<20),
	}
	if budget > 0 {
		p.inflight = min(maxInflight, max(b/4, 1<<20))
	}
	return p
}

// memoryPlan is the plan of this config.
func (c *Config) memoryPlan() memoryPlan {
	return memoryPlanFor(int64(c.Memory.Budget), c.Kafka.MaxInFlightBytes)
}

// applyMemoryLimit sets the Go runtime's soft memory limit to the budget,
// so that the garbage collector works harder before the process outgrows
// it, unless GOMEMLIMIT in the environment already chose one (the runtime
// read it at start). It returns a func that restores the previous limit.
func applyMemoryLimit(p memoryPlan, log *slog.Logger) func() {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Info("memory budget", "budget", byteSize(p.budget).String(), "gomemlimit", env, "gomemlimit_from", "environment")
		return func() {}
	}
	if p.budget == 0 {
		log.Info("memory budget", "budget", "unlimited")
		return func() {}
	}
	old := debug.SetMemoryLimit(p.budget)
	log.Info("memory budget", "budget", byteSize(p.budget).String(), "gomemlimit", byteSize(p.budget).String(),
		"index_cache", byteSize(p.indexCache).String(), "cold_row_groups", byteSize(p.rowGroups).String(),
		"cold_footers", byteSize(p.footers).String(), "max_inflight_bytes", p.inflight, "archive", byteSize(p.archive).String())
	return func() { debug.SetMemoryLimit(old) }
}
