package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Exit codes of the admin commands (korvet topics|groups|acls|users):
// scripts branch on them, so they are part of the interface (README).
const (
	exitOK          = 0
	exitFailed      = 1 // korvet refused or failed the request
	exitUsage       = 2
	exitNotFound    = 3 // 404
	exitNotAllowed  = 4 // 401, 403
	exitUnreachable = 5 // no korvet answers
)

// flagKind says how a flag takes its value.
type flagKind int

const (
	flagString flagKind = iota // --name V or --name=V
	flagBool                   // --name (or --name=true|false)
	flagList                   // repeatable: --name V --name W
)

// cliArgs is a parsed command line: flags may come before, between or
// after the positional arguments (korvet topics create NAME --partitions 3),
// which Go's flag package does not allow: it stops at the first
// positional argument.
type cliArgs struct {
	pos   []string
	vals  map[string]string
	lists map[string][]string
	set   map[string]bool
}

// errHelp is returned when --help or -h is given.
var errHelp = errors.New("help requested")

// commonFlags are accepted by every admin command.
var commonFlags = map[string]flagKind{
	"config": flagString, "url": flagString, "user": flagString, "token": flagString, "output": flagString,
}

// parseArgs parses args against the flags the command knows (plus the
// common ones). "--" ends the flags; a lone "-" is positional.
func parseArgs(args []string, known map[string]flagKind) (cliArgs, error) {
	a := cliArgs{vals: map[string]string{}, lists: map[string][]string{}, set: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			a.pos = append(a.pos, args[i+1:]...)
			break
		}
		if arg == "-h" || arg == "--help" || arg == "-help" {
			return a, errHelp
		}
		if len(arg) < 2 || arg[0] != '-' {
			a.pos = append(a.pos, arg)
			continue
		}
		name := strings.TrimLeft(arg, "-")
		value, hasValue := "", false
		if n, v, ok := strings.Cut(name, "="); ok {
			name, value, hasValue = n, v, true
		}
		kind, ok := known[name]
		if !ok {
			kind, ok = commonFlags[name]
		}
		if !ok || name == "" {
			return a, fmt.Errorf("unknown flag %s", arg)
		}
		switch kind {
		case flagBool:
			b := true
			if hasValue {
				var err error
				if b, err = strconv.ParseBool(value); err != nil {
					return a, fmt.Errorf("flag --%s: want true or false, got %q", name, value)
				}
			}
			a.vals[name] = strconv.FormatBool(b)
		default:
			if !hasValue {
				if i+1 >= len(args) {
					return a, fmt.Errorf("flag --%s needs a value", name)
				}
				i++
				value = args[i]
			}
			if kind == flagList {
				a.lists[name] = append(a.lists[name], value)
			} else {
				if a.set[name] && a.vals[name] != value {
					return a, fmt.Errorf("flag --%s given twice", name)
				}
				a.vals[name] = value
			}
		}
		a.set[name] = true
	}
	return a, nil
}

func (a cliArgs) str(name string) string { return a.vals[name] }
func (a cliArgs) has(name string) bool   { return a.set[name] }
func (a cliArgs) flag(name string) bool  { return a.vals[name] == "true" }

// int reads an integer flag; def when absent.
func (a cliArgs) int(name string, def int64) (int64, error) {
	v, ok := a.vals[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("flag --%s: want an integer, got %q", name, v)
	}
	return n, nil
}

// keyValues parses repeated k=v flags into a map.
func (a cliArgs) keyValues(name string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range a.lists[name] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("flag --%s: want key=value, got %q", name, kv)
		}
		out[k] = v
	}
	return out, nil
}

// usageError is a command line korvet cannot act on: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// onePositional checks that exactly the named positional argument was given.
func (a cliArgs) onePositional(what string) (string, error) {
	switch len(a.pos) {
	case 0:
		return "", usagef("missing %s", what)
	case 1:
		if a.pos[0] == "" {
			return "", usagef("empty %s", what)
		}
		return a.pos[0], nil
	default:
		return "", usagef("one %s expected, got %d arguments: %s", what, len(a.pos), strings.Join(a.pos, " "))
	}
}

func (a cliArgs) noPositional() error {
	if len(a.pos) > 0 {
		return usagef("unexpected argument %q", a.pos[0])
	}
	return nil
}
