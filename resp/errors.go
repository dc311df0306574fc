package resp

import (
	"errors"
	"strings"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("resp: client closed")

// ErrUnknownOutcome matches (errors.Is) a *ConnError raised after commands
// may have reached Redis: they may or may not have been applied.
var ErrUnknownOutcome = errors.New("outcome unknown")

// errPipeline marks a malformed Pipeline; nothing was sent.
var errPipeline = errors.New("resp: malformed pipeline")

// Error is an error reply from Redis, e.g. "WRONGTYPE Operation against a
// key holding the wrong kind of value" has Prefix "WRONGTYPE".
type Error struct {
	Prefix string // first word when it is an upper-case code (ERR, WRONGTYPE, EXECABORT...), else ""
	Msg    string // the rest of the text
}

func (e *Error) Error() string {
	switch {
	case e.Prefix == "":
		return e.Msg
	case e.Msg == "":
		return e.Prefix
	}
	return e.Prefix + " " + e.Msg
}

func parseError(text []byte) *Error {
	s := string(text)
	word, rest, _ := strings.Cut(s, " ")
	if word == "" {
		return &Error{Msg: s}
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return &Error{Msg: s}
		}
	}
	return &Error{Prefix: word, Msg: rest}
}

// ConnError is a failure of the connection rather than a reply from Redis:
// dialing, waiting for a pooled connection, I/O, a timeout, or a reply
// that breaks the protocol. The connection involved is never reused.
type ConnError struct {
	Op   string // what failed: "dial", "acquire", "write", "read", ...
	Addr string
	// Sent is true when the commands may have reached Redis, so their
	// outcome is unknown; false when they certainly were not sent.
	Sent bool
	Err  error
}

func (e *ConnError) Error() string {
	var b strings.Builder
	b.WriteString("resp: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.Addr)
	if e.Sent {
		b.WriteString(" (outcome unknown)")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ConnError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnknownOutcome) report whether commands may
// have been applied.
func (e *ConnError) Is(target error) bool {
	return target == ErrUnknownOutcome && e.Sent
}

// IsConnError reports whether err came from the connection (see ConnError)
// rather than from a Redis error reply. Retrying such an error is only safe
// for idempotent commands unless errors.Is(err, ErrUnknownOutcome) is false.
func IsConnError(err error) bool {
	var ce *ConnError
	return errors.As(err, &ce)
}
