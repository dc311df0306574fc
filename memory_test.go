package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

func TestParseByteSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1048576": 1 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30, "1.5GiB": 3 << 29,
		"64MB": 64e6, "512 KiB": 512 << 10, "100B": 100,
	}
	for in, want := range good {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "12XB", "lots", "1e30GiB", "NaNMiB", "InfGiB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestMemoryBudgetConfig(t *testing.T) {
	for _, tc := range []struct {
		text string
		want byteSize
	}{
		{"", defaultMemoryBudget},
		{"[memory]\nbudget = \"64MiB\"\n", 64 << 20},
		{"[memory]\nbudget = 134217728\n", 128 << 20},
		{"[memory]\nbudget = \"0\"\n", 0},
		{"[memory]\nbudget = 0\n", 0},
	} {
		c, err := loadConfig(writeConfig(t, tc.text))
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if c.Memory.Budget != tc.want {
			t.Errorf("%q: budget %d, want %d", tc.text, c.Memory.Budget, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"log_level = \"info\"\n[memory]\nbudget = \"16MiB\"\n", ":3: memory.budget: must be 0 (unlimited) or at least 32MiB"},
		{"[memory]\nbudget = \"lots\"\n", `bad size "lots"`},
		{"[memory]\nbudget = -5\n", "negative"},
		{"[memory]\nbudget = true\n", "want a size"},
	} {
		_, err := loadConfig(writeConfig(t, tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.text, err, tc.want)
		}
	}
}

// TestMemoryPlan checks each cache's share, that the default budget keeps
// the sizes korvet had before the budget, and that a small one scales
// them down.
func TestMemoryPlan(t *testing.T) {
	def := memoryPlanFor(defaultMemoryBudget, 64<<20)
	if def.indexCache != 16<<20 || def.rowGroups != 64<<20 || def.footers != 32<<20 || def.inflight != 64<<20 || def.archive != engine.DefaultArchiveMemory {
		t.Errorf("default plan %+v, want 16 MiB index cache, 64 MiB row groups, 32 MiB footers, 64 MiB in flight, the engine's default archive memory", def)
	}
	pi := memoryPlanFor(64<<20, 64<<20)
	if pi.indexCache != 4<<20 || pi.rowGroups != 16<<20 || pi.footers != 8<<20 || pi.inflight != 16<<20 || pi.archive != 8<<20 {
		t.Errorf("64 MiB plan %+v", pi)
	}
	if sum := pi.indexCache + int64(pi.rowGroups) + int64(pi.footers); sum > pi.budget/2 {
		t.Errorf("caches take %d of a %d budget, want at most half", sum, pi.budget)
	}
	// An explicit smaller max_inflight_bytes stays.
	if p := memoryPlanFor(1<<30, 2<<20); p.inflight != 2<<20 {
		t.Errorf("inflight %d, want the configured 2 MiB", p.inflight)
	}
	// Unlimited: default cache sizes, max_inflight_bytes as configured.
	if p := memoryPlanFor(0, 512<<20); p.budget != 0 || p.indexCache != 16<<20 || p.inflight != 512<<20 {
		t.Errorf("unlimited plan %+v", p)
	}
}

// gomemlimit reads go_gc_gomemlimit_bytes from a running korvet's
// /metrics: the limit the process's runtime really has.
func gomemlimit(ctx context.Context, httpAddr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_gc_gomemlimit_bytes "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no go_gc_gomemlimit_bytes in /metrics (%v)", sc.Err())
}

// TestMemoryBudgetSetsGOMEMLIMIT starts korvet processes and reads the
// runtime's limit back: the budget when GOMEMLIMIT is not set, the
// environment's when it is, none with budget 0.
func TestMemoryBudgetSetsGOMEMLIMIT(t *testing.T) {
	r := testbed.StartRedis(t)
	for _, tc := range []struct {
		name, keyspace, extra, env string
		want                       float64
	}{
		{"budget", "mem1", `memory.budget = "64MiB"`, "", 64 << 20},
		{"environment wins", "mem2", `memory.budget = "64MiB"`, "100MiB", 100 << 20},
		{"unlimited", "mem3", `memory.budget = "0"`, "", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, Keyspace: tc.keyspace, Extra: tc.extra})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := gomemlimit(ctx, k.HTTPAddr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("go_gc_gomemlimit_bytes = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestMemoryBudgetReachesCaches checks that the plan's sizes are what the
// cold tier, the KV index and the archiving worker are opened with.
func TestMemoryBudgetReachesCaches(t *testing.T) {
	c := defaultConfig()
	c.Memory.Budget = 64 << 20
	if cc := c.coldConfig(); cc.ReadCacheBytes != 16<<20 || cc.FooterCacheBytes != 8<<20 {
		t.Errorf("cold config with a 64MiB budget: row groups %d, footers %d; want 16 MiB and 8 MiB", cc.ReadCacheBytes, cc.FooterCacheBytes)
	}
	if eo := engineOptions(c, nil, nil); eo.Index.CacheSize != 4<<20 || eo.ArchiveMemory != 8<<20 {
		t.Errorf("index block cache %d, archive memory %d with a 64MiB budget, want 4 MiB and 8 MiB", eo.Index.CacheSize, eo.ArchiveMemory)
	}
}
