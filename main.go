// Command korvet is a Kafka-compatible broker whose log lives in Redis
// Streams.
//
// Data flow: Kafka clients → kafkawire (protocol, record batches) →
// engine (topics, partitions, offsets; appends group-committed as Redis
// transactions) → resp (pipelined RESP to Redis). Fetches go the other
// way. web serves health and, later, the status page and KV view.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/resp"
	"github.com/korvet/korvet/web"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `korvet: a Kafka-compatible broker on Redis Streams

usage:
  korvet serve [--config korvet.toml]   run the broker
  korvet version                        print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "korvet %s\n", version)
		return 0
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		cfgPath := fs.String("config", "/etc/korvet/korvet.toml", "path to korvet.toml")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "korvet: %v\n", err)
			return 1
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, cfg, stderr); err != nil {
			fmt.Fprintf(stderr, "korvet: %v\n", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "korvet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func serve(ctx context.Context, cfg Config, logOut io.Writer) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	started := time.Now()

	rc, err := resp.New(cfg.Redis.URL, resp.Options{PoolSize: cfg.Redis.PoolSize, Timeout: cfg.Redis.Timeout.Duration, Logger: log})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	defer rc.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = rc.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s does not answer (is redis-server running? set [redis] url in the config): %w", cfg.Redis.URL, err)
	}

	eng, err := engine.Open(ctx, rc, engine.Options{
		Keyspace:          cfg.Redis.Keyspace,
		AutoCreateTopics:  cfg.Kafka.AutoCreateTopics,
		DefaultPartitions: cfg.Kafka.DefaultPartitions,
		TopicDefaults:     cfg.topicDefaults,
		Logger:            log,
	})
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer eng.Close()

	kln, err := net.Listen("tcp", cfg.Kafka.Listen)
	if err != nil {
		return fmt.Errorf("kafka listen on %s: %w", cfg.Kafka.Listen, err)
	}
	host, port, err := cfg.advertised()
	if err != nil {
		return fmt.Errorf("kafka advertised address: %w", err)
	}
	if port == 0 {
		port = int32(kln.Addr().(*net.TCPAddr).Port)
	}
	ks := kafkawire.NewServer(eng, kafkawire.Options{
		MaxRequestBytes: cfg.Kafka.MaxRequestBytes,
		AdvertisedHost:  host,
		AdvertisedPort:  port,
		NodeID:          cfg.Kafka.NodeID,
		MaxConnections:  cfg.Kafka.MaxConnections,
		Logger:          log,
	})

	hln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		kln.Close()
		return fmt.Errorf("http listen on %s: %w", cfg.HTTP.Listen, err)
	}
	hs := &http.Server{Handler: web.New(eng, web.Options{Version: version, Started: started}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	log.Info("korvet started", "version", version, "kafka", kln.Addr().String(), "advertised", net.JoinHostPort(host, fmt.Sprint(port)), "http", hln.Addr().String(), "redis", cfg.Redis.URL, "keyspace", cfg.Redis.Keyspace)

	err = ks.Serve(ctx, kln, cfg.ShutdownGrace.Duration)
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	log.Info("korvet stopped")
	return err
}
