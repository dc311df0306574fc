package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/resp"
)

const userUsage = `usage:
  korvet user add [--config korvet.toml] [--mechanism M] [--iterations N] NAME
  korvet user delete [--config korvet.toml] [--mechanism M] NAME
  korvet user list [--config korvet.toml]

Users authenticate with SASL SCRAM (or PLAIN, checked against the same
credentials). add asks for the password twice on a terminal, or reads the
first line of standard input: never from the command line, where ps would
show it. M is SCRAM-SHA-256, SCRAM-SHA-512 or all (the default). The
broker may be running: changes apply to the next authentication.
`

// runUser is `korvet user`: SASL users in Redis, next to the data.
func runUser(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "add" && args[0] != "delete" && args[0] != "list" {
		fmt.Fprint(stderr, userUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, userUsage) }
	cfgPath := fs.String("config", "/etc/korvet/korvet.toml", "path to korvet.toml")
	mechName := "all"
	iterations := auth.DefaultIterations
	if sub != "list" {
		fs.StringVar(&mechName, "mechanism", mechName, "SCRAM-SHA-256, SCRAM-SHA-512 or all")
	}
	if sub == "add" {
		fs.IntVar(&iterations, "iterations", iterations, fmt.Sprintf("PBKDF2 iterations, %d to %d", auth.MinIterations, auth.MaxIterations))
	}
	// Flags may come before or after the name.
	var names []string
	for rest := args[1:]; ; rest = fs.Args()[1:] {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
	}
	if want := map[bool]int{true: 0, false: 1}[sub == "list"]; len(names) != want {
		fmt.Fprint(stderr, userUsage)
		return 2
	}
	mechs := auth.Mechanisms
	if !strings.EqualFold(mechName, "all") {
		m, ok := auth.ParseMechanism(mechName)
		if !ok {
			fmt.Fprintf(stderr, "korvet: unknown mechanism %q (use SCRAM-SHA-256, SCRAM-SHA-512 or all)\n", mechName)
			return 2
		}
		mechs = []auth.Mechanism{m}
	}
	if err := userCommand(sub, names, mechs, iterations, *cfgPath, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "korvet: %v\n", err)
		return 1
	}
	return 0
}

func userCommand(sub string, names []string, mechs []auth.Mechanism, iterations int, cfgPath string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	var password string
	if sub == "add" {
		if err := auth.ValidUserName(names[0]); err != nil {
			return err
		}
		if iterations < auth.MinIterations || iterations > auth.MaxIterations {
			return fmt.Errorf("--iterations %d: use %d to %d", iterations, auth.MinIterations, auth.MaxIterations)
		}
		// Before connecting: a typo in the password costs no Redis work.
		if password, err = readPassword(stdin, stderr, names[0]); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := resp.New(cfg.Redis.URL, cfg.redisOptions(1, nil))
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	defer rc.Close()
	store, err := auth.Open(ctx, rc, auth.Options{Keyspace: cfg.Redis.Keyspace, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("redis at %s: %w", cfg.shownRedisURL(), err)
	}
	switch sub {
	case "add":
		for _, m := range mechs {
			c, err := auth.NewCredential(m, password, iterations)
			if err != nil {
				return err
			}
			if err := store.SetCredential(ctx, m, names[0], c); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "user %s: %s credential set (%d iterations)\n", names[0], m, iterations)
		}
	case "delete":
		deleted := 0
		for _, m := range mechs {
			ok, err := store.DeleteCredential(ctx, m, names[0])
			if err != nil {
				return err
			}
			if ok {
				deleted++
				fmt.Fprintf(stdout, "user %s: %s credential deleted\n", names[0], m)
			}
		}
		if deleted == 0 {
			return fmt.Errorf("user %q has no credential to delete", names[0])
		}
	case "list":
		users, err := store.Users(ctx)
		if err != nil {
			return err
		}
		for _, u := range users {
			var ms []string
			for _, m := range u.Mechanisms {
				ms = append(ms, fmt.Sprintf("%s (%d iterations)", m.Mechanism, m.Iterations))
			}
			fmt.Fprintf(stdout, "%s\t%s\n", u.Name, strings.Join(ms, ", "))
		}
	}
	return nil
}

// readPassword asks twice on a terminal, without echo; otherwise it reads
// the first line of stdin.
func readPassword(stdin io.Reader, prompt io.Writer, user string) (string, error) {
	if f, ok := stdin.(*os.File); ok {
		pw, isTerm, err := readHidden(f, prompt, "Password for "+user+": ", "Again: ")
		if isTerm {
			return pw, err
		}
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if pw == "" {
		return "", errors.New("empty password (give it on stdin, e.g. from a password manager)")
	}
	return pw, nil
}
