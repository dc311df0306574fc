package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/index"
	"github.com/korvet/korvet/resp"
)

// korvet index rebuild|verify: maintenance of the KV key index.
//
// A running korvet holds Pebble's lock on the index directory. With it
// stopped, a full rebuild loads a fresh directory next to the index
// ({data_dir}/index.rebuild) and swaps it in only once complete, so an
// interrupted rebuild leaves the old index as it was; --topic rebuilds
// some topics in place. With korvet running, rebuild asks it over HTTP
// (POST /api/v1/index/rebuild, with http.admin_token) to do the same
// online and waits for the end; verify needs korvet stopped.

const indexUsage = `usage:
  korvet index rebuild [--config korvet.toml] [--topic T,...]   rebuild the KV key index from the log
  korvet index verify  [--config korvet.toml] [--topic T,...]   compare the KV key index with the log

With korvet running, rebuild asks it to rebuild online (needs http.admin_token;
not with --topic); verify needs korvet stopped. Deleting the index directory
and starting korvet also rebuilds the index.
`

// indexDir is where the key index lives.
func indexDir(cfg Config) string { return filepath.Join(cfg.DataDir, "index") }

func runIndex(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, indexUsage)
		return 2
	}
	sub := args[0]
	if sub != "rebuild" && sub != "verify" {
		fmt.Fprintf(stderr, "korvet index: unknown command %q\n\n%s", sub, indexUsage)
		return 2
	}
	fs := flag.NewFlagSet("index "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/korvet/korvet.toml", "path to korvet.toml")
	topicList := fs.String("topic", "", "only these topics (comma-separated)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "korvet: %v\n", err)
		return 1
	}
	var topics []string
	for _, t := range strings.Split(*topicList, ",") {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code, err := func() (int, error) {
		if sub == "rebuild" {
			return 0, indexRebuild(ctx, cfg, topics, stdout, stderr)
		}
		return indexVerify(ctx, cfg, topics, stdout)
	}()
	if errors.Is(err, index.ErrLocked) && sub == "rebuild" && len(topics) == 0 && (cfg.HTTP.AdminToken != "" || socketExists(cfg)) {
		// korvet runs: ask it to rebuild online.
		err = rebuildOnline(ctx, cfg, stdout, stderr)
	}
	if err != nil {
		if errors.Is(err, index.ErrLocked) {
			fmt.Fprintf(stderr, "korvet index %s: %v\n\nA korvet is running with data_dir %s (it holds the index lock). Stop it first;\nor set [http] admin_token, and korvet index rebuild asks the running korvet to rebuild online\n(POST /api/v1/index/rebuild); or delete %s and restart korvet: it rebuilds the index as it starts.\n", sub, err, cfg.DataDir, indexDir(cfg))
			return 1
		}
		fmt.Fprintf(stderr, "korvet index %s: %v\n", sub, err)
		return 1
	}
	return code
}

// openLogOnly connects to Redis and opens the engine without a key index,
// to read the log.
func openLogOnly(ctx context.Context, cfg Config, logOut io.Writer) (*engine.Engine, func(), error) {
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rc, err := resp.New(cfg.Redis.URL, cfg.redisOptions(cfg.Redis.PoolSize, log))
	if err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = rc.Ping(pingCtx)
	cancel()
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("redis at %s does not answer: %w", cfg.shownRedisURL(), err)
	}
	eng, err := engine.Open(ctx, rc, engine.Options{
		Keyspace:      cfg.Redis.Keyspace,
		TopicDefaults: cfg.topicDefaults,
		// Retention is the serving korvet's job, not this command's.
		RetentionInterval: 24 * time.Hour,
		Logger:            log,
	})
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("open engine: %w", err)
	}
	return eng, func() { eng.Close(); rc.Close() }, nil
}

func progressPrinter(w io.Writer, what string) func(engine.RebuildProgress) {
	return func(p engine.RebuildProgress) {
		pct := 100.0
		if p.Total > 0 {
			pct = 100 * float64(p.Done) / float64(p.Total)
		}
		rate := float64(p.Records) / max(p.Elapsed.Seconds(), 1e-9)
		state := ""
		if p.Final {
			state = " done"
		}
		fmt.Fprintf(w, "%s: %d records, %.1f%% of the way to the last stable offsets, %.0f records/s, %.1fs%s\n", what, p.Records, pct, rate, p.Elapsed.Seconds(), state)
	}
}

func indexRebuild(ctx context.Context, cfg Config, topics []string, stdout, stderr io.Writer) error {
	dir := indexDir(cfg)
	if len(topics) > 0 {
		return rebuildTopics(ctx, cfg, dir, topics, stdout, stderr)
	}
	lock, err := index.Lock(dir)
	if err != nil {
		return err
	}
	unlock := sync.OnceValue(lock.Close)
	defer unlock()
	eng, closeEng, err := openLogOnly(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer closeEng()

	tmp := dir + ".rebuild"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	began := time.Now()
	ix, err := index.Open(tmp, index.Options{Bulk: true})
	if err != nil {
		return err
	}
	res, err := eng.KV().Rebuild(ctx, ix, engine.RebuildOptions{Progress: progressPrinter(stderr, "rebuild")})
	if err != nil {
		ix.Close()
		os.RemoveAll(tmp)
		return fmt.Errorf("rebuild (the old index is untouched): %w", err)
	}
	if err := ix.Close(); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	took := time.Since(began) // the final flush included
	size, _ := index.DirSize(tmp)
	// Swap: the old directory moves aside (its lock, which we hold, with
	// it), the new one takes its name.
	old := dir + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("swap in the new index: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.Rename(old, dir)
		return fmt.Errorf("swap in the new index: %w", err)
	}
	unlock()
	if err := os.RemoveAll(old); err != nil {
		fmt.Fprintf(stderr, "korvet index rebuild: could not remove the old index %s: %v\n", old, err)
	}
	fmt.Fprintf(stdout, "rebuilt %s: %d topics, %d partitions, %d records in %.2fs (%.0f records/s), %d bytes on disk\n",
		dir, res.Topics, res.Partitions, res.Records, took.Seconds(), float64(res.Records)/max(took.Seconds(), 1e-9), size)
	return nil
}

// rebuildTopics rebuilds some topics in place: their keys and checkpoints
// go in one batch, so an interruption leaves them to be caught up from
// the log start by the next korvet.
func rebuildTopics(ctx context.Context, cfg Config, dir string, topics []string, stdout, stderr io.Writer) error {
	ix, err := index.Open(dir, index.Options{})
	if err != nil {
		return err
	}
	defer ix.Close()
	eng, closeEng, err := openLogOnly(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer closeEng()
	for _, name := range topics {
		t := eng.Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %q", engine.ErrUnknownTopic, name)
		}
		if err := ix.DropTopic(t.ID()); err != nil {
			return err
		}
	}
	res, err := eng.KV().Rebuild(ctx, ix, engine.RebuildOptions{Topics: topics, Progress: progressPrinter(stderr, "rebuild")})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rebuilt %s in %s: %d partitions, %d records in %.2fs\n", strings.Join(topics, ","), dir, res.Partitions, res.Records, res.Elapsed.Seconds())
	return nil
}

func indexVerify(ctx context.Context, cfg Config, topics []string, stdout io.Writer) (int, error) {
	dir := indexDir(cfg)
	if _, err := os.Stat(dir); err != nil {
		return 1, fmt.Errorf("no index at %s: %w", dir, err)
	}
	ix, err := index.Open(dir, index.Options{})
	if err != nil {
		return 1, err
	}
	defer ix.Close()
	eng, closeEng, err := openLogOnly(ctx, cfg, os.Stderr)
	if err != nil {
		return 1, err
	}
	defer closeEng()
	scratch, err := os.MkdirTemp(cfg.DataDir, "index-verify-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(scratch)
	const show = 50
	shown := 0
	res, err := eng.KV().Verify(ctx, ix, scratch, topics, func(d engine.IndexDiff) {
		if shown++; shown <= show {
			fmt.Fprintf(stdout, "%s key %s: index %s, log %s\n", d.Topic, strconv.Quote(string(d.Key)), ptrString(d.Index), ptrString(d.Log))
		}
	})
	if err != nil {
		return 1, err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if res.Diffs > show {
		fmt.Fprintf(stdout, "... and %d more differences\n", res.Diffs-show)
	}
	fmt.Fprintf(stdout, "verified %d topics, %d keys: %d differences\n", res.Topics, res.Keys, res.Diffs)
	if res.Diffs > 0 {
		return 1, nil
	}
	return 0, nil
}

func ptrString(p *index.Pointer) string {
	switch {
	case p == nil:
		return "absent"
	case p.Tombstone:
		return fmt.Sprintf("tombstone at %d/%d", p.Partition, p.Offset)
	default:
		return fmt.Sprintf("%d/%d", p.Partition, p.Offset)
	}
}

// rebuildOnline asks the korvet serving this config to rebuild its index
// (POST /api/v1/index/rebuild with the admin token) and waits for the end.
func rebuildOnline(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	base, hc, err := adminClient(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/index/rebuild", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.HTTP.AdminToken)
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the index is locked by a running korvet, which does not answer at %s: %w", base, err)
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		return fmt.Errorf("the running korvet refused the rebuild: %s: %s", res.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stderr, "korvet is running: it rebuilds its index online (progress in its log)\n")
	began := time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting (the rebuild goes on in korvet): %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
		var st struct {
			Index *struct {
				Rebuilding  bool      `json:"rebuilding"`
				LastRebuild time.Time `json:"last_rebuild"`
				Error       string    `json:"error"`
			} `json:"index"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/status", nil)
		res, err := hc.Do(req)
		if err != nil {
			continue
		}
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil || st.Index == nil || st.Index.Rebuilding || st.Index.LastRebuild.Before(began) {
			continue
		}
		if st.Index.Error != "" {
			return errors.New(st.Index.Error)
		}
		fmt.Fprintf(stdout, "rebuilt online by the running korvet in %.1fs\n", time.Since(began).Seconds())
		return nil
	}
}
