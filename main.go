// Command korvet is a Kafka-compatible broker whose log lives in Redis
// Streams.
//
// Data flow: Kafka clients → kafkawire (protocol, record batches) →
// engine (topics, partitions, offsets; appends group-committed as Redis
// transactions) → resp (pipelined RESP to Redis). Fetches go the other
// way. web serves the status page, its JSON API, /metrics, health and the
// KV view.
//
// This package reads the config and wires the parts: config.go reads
// korvet.toml; serve.go opens Redis, the cold tier, the engine and the
// users, then the doors: listeners.go (Kafka), http_server.go (HTTP),
// admin_socket.go (the local admin socket), admin_user.go (the first
// super user). index_cmd.go and user_cmd.go are the maintenance commands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `korvet: a Kafka-compatible broker on Redis Streams

usage:
  korvet serve [--config korvet.toml]   run the broker
  korvet index rebuild|verify [--config korvet.toml] [--topic T]
                                        rebuild the KV key index from the log, or
                                        compare it with the log (korvet stopped)
  korvet user add|delete|list [--config korvet.toml] [NAME]
                                        manage SASL users (password from a
                                        prompt or stdin)
  korvet topics list|describe|create|delete|alter|add-partitions|delete-records|produce|tail
  korvet groups list|describe|delete|reset-offsets
  korvet acls list|create|delete
  korvet users list|set|delete
                                        administer a running korvet over its admin
                                        socket or --url (korvet topics --help, ...)
  korvet completion bash|zsh|fish       print a shell completion script
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
	case "index":
		return runIndex(args[1:], stdout, stderr)
	case "user":
		return runUser(args[1:], os.Stdin, stdout, stderr)
	case "topics", "groups", "acls", "users":
		return runAdmin(args[0], args[1:], cliEnv{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv})
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "korvet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
