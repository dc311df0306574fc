package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// The Grafana dashboard (packaging/grafana/korvet.json) must only query
// metrics korvet exports: TestGrafanaDashboardMetrics checks every name
// against a running korvet's /metrics.

const dashboardPath = "packaging/grafana/korvet.json"

// promqlWords are PromQL's keywords, aggregation operators and modifiers:
// identifiers that are not metric names even without a '(' after them.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true,
	"inf": true, "nan": true,
}

// promqlMetrics returns the metric names a PromQL expression selects: the
// identifiers that are not functions (followed by '('), keywords, label
// lists of by/without/on/ignoring/group_*, or inside {...}, [...] or
// strings. A tokenizer is enough: korvet's dashboard needs no full parser.
func promqlMetrics(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// skipTo returns the index after the closing byte, strings inside skipped.
	skipTo := func(i int, closing byte) int {
		for i < len(expr) && expr[i] != closing {
			if expr[i] == '"' || expr[i] == '\'' {
				q := expr[i]
				for i++; i < len(expr) && expr[i] != q; i++ {
					if expr[i] == '\\' {
						i++
					}
				}
			}
			i++
		}
		return i + 1
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			i = skipTo(i+1, '}')
		case c == '[':
			i = skipTo(i+1, ']')
		case c == '"' || c == '\'' || c == '`':
			i = skipTo(i+1, c)
		case c >= '0' && c <= '9' || c == '.':
			// A number, or a duration such as 5m after offset.
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '$':
			// A Grafana variable ($instance, ${x}) outside a selector.
			for i++; i < len(expr) && (isPart(expr[i]) || expr[i] == '{' || expr[i] == '}'); i++ {
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case strings.ToLower(word) == "by" || word == "without" || word == "on" || word == "ignoring" || word == "group_left" || word == "group_right":
				if next < len(expr) && expr[next] == '(' {
					j = skipTo(next+1, ')')
				}
			case next < len(expr) && expr[next] == '(':
				// A function or an aggregation.
			case promqlWords[strings.ToLower(word)]:
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestPromQLMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (api) (rate(korvet_kafka_sent_bytes_total{instance=~"$instance"}[$__rate_interval]))`: {"korvet_kafka_sent_bytes_total"},
		`histogram_quantile(0.99, sum by (le, api) (rate(x_bucket{a="b}"}[5m])))`:                     {"x_bucket"},
		`sum(a) by (group) / ignoring(topic) group_left b offset 5m > bool 3`:                         {"a", "b"},
		`time() - max(korvet_start_time_seconds)`:                                                     {"korvet_start_time_seconds"},
		`count(korvet_redis_up == 0) or vector(0)`:                                                    {"korvet_redis_up"},
		`sum without(partition) (x) and on(topic) y unless z`:                                         {"x", "y", "z"},
		`topk(5, m{l='v'}) * 1e3 + Inf`:                                                               {"m"},
	} {
		if got := promqlMetrics(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("promqlMetrics(%s) = %q, want %q", expr, got, want)
		}
	}
}

// dashboardExprs reads every panel's (and nested row panel's) PromQL.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels     []json.RawMessage `json:"panels"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	}
	var d struct {
		Inputs []struct {
			Name string `json:"name"`
		} `json:"__inputs"`
		Panels []json.RawMessage `json:"panels"`
		UID    string            `json:"uid"`
		Title  string            `json:"title"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.UID == "" || d.Title == "" {
		t.Errorf("%s: want one input DS_PROMETHEUS, a uid and a title", dashboardPath)
	}
	exprs := map[string]string{} // expr -> panel title
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboardPath, err)
			}
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}") {
				t.Errorf("panel %q does not use the ${DS_PROMETHEUS} datasource", p.Title)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs[tg.Expr] = p.Title
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return exprs
}

// dashboardMetrics maps each metric name the dashboard queries to a panel
// that does.
func dashboardMetrics(t *testing.T) map[string]string {
	out := map[string]string{}
	for expr, title := range dashboardExprs(t) {
		names := promqlMetrics(expr)
		if len(names) == 0 {
			t.Errorf("panel %q: no metric in %s", title, expr)
		}
		for _, n := range names {
			out[n] = title
		}
	}
	return out
}

// exportedFamilies are the metric family names in a /metrics text answer
// (# TYPE lines), with the series names of histograms and summaries.
func exportedFamilies(text string) map[string]bool {
	fams := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			fams[f[2]] = true
			if f[3] == "histogram" || f[3] == "summary" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					fams[f[2]+s] = true
				}
			}
		}
	}
	return fams
}

func TestGrafanaDashboardParses(t *testing.T) {
	ms := dashboardMetrics(t)
	var names []string
	for n := range ms {
		names = append(names, n)
		if !strings.HasPrefix(n, "korvet_") {
			t.Errorf("dashboard queries %s (panel %q): not a korvet metric", n, ms[n])
		}
	}
	sort.Strings(names)
	if len(names) < 25 {
		t.Errorf("dashboard queries only %d metrics: %v", len(names), names)
	}
}

// TestGrafanaDashboardMetrics starts korvet on a real redis-server, makes
// every family appear (a topic, records, a group that committed, the
// memory sampler and the archiving loop run) and checks that each metric
// the dashboard queries is in /metrics.
func TestGrafanaDashboardMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and korvet")
	}
	r := testbed.StartRedis(t)
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, Extra: "redis.memory_sample_interval = \"1s\"\ncold.archive_interval = \"1s\""})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.KafkaAddr), kgo.ConsumerGroup("dash"), kgo.ConsumeTopics("dash"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "dash"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dash", Key: []byte{byte(i)}, Value: []byte("value")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 10 && ctx.Err() == nil; {
		got += len(cl.PollFetches(ctx).Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	want := dashboardMetrics(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	testbed.Eventually(t, 60*time.Second, "every dashboard metric in /metrics", func() (bool, string) {
		res, err := hc.Get("http://" + k.HTTPAddr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 16<<20))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return false, res.Status
		}
		fams := exportedFamilies(string(body))
		var missing []string
		for name, panel := range want {
			if !fams[name] {
				missing = append(missing, name+" (panel "+panel+")")
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, "missing: " + strings.Join(missing, ", ")
	})
}
