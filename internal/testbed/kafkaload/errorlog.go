package kafkaload

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errorLog is a kgo.Logger that keeps what a producer's log says about
// errors: the retried produce errors by name (from the debug line
// "produced", whose "to" holds "retrying@OFFSET,N(ERR)") and every line
// at warn or error level or about a failed batch.
type errorLog struct {
	mu      sync.Mutex
	retried map[string]int
	bad     []string
}

func (l *errorLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *errorLog) Log(level kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case msg == "produced":
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "to" {
				l.countRetries(fmt.Sprint(kv[i+1]))
			}
		}
	case msg == "batch in a produce request failed", level <= kgo.LogLevelWarn && level > kgo.LogLevelNone:
		l.bad = append(l.bad, fmt.Sprintf("%v %s %v", level, msg, kv))
	}
}

// countRetries counts each "retrying@OFFSET,N(ERR)" in s by ERR.
func (l *errorLog) countRetries(s string) {
	for {
		j := strings.Index(s, "retrying@")
		if j < 0 {
			return
		}
		s = s[j:]
		a, b := strings.IndexByte(s, '('), strings.IndexByte(s, ')')
		if a < 0 || b < a {
			return
		}
		l.retried[s[a+1:b]]++
		s = s[b:]
	}
}

// summary is the retried errors so far, and the last warning.
func (l *errorLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprint(l.retried)
	if len(l.bad) > 0 {
		s += "; last warning: " + l.bad[len(l.bad)-1]
	}
	return s
}

// check fails tb for a failed produce batch and logs the warnings and the
// retried errors.
func (l *errorLog) check(tb testing.TB) {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	warned := map[string]int{}
	for _, b := range l.bad {
		if strings.Contains(b, "batch in a produce request failed") {
			tb.Errorf("producer: %s", b)
		} else {
			warned[b]++
		}
	}
	for w, n := range warned {
		tb.Logf("producer (%d times): %s", n, w)
	}
	tb.Logf("producer: produce errors franz-go retried: %v", l.retried)
}
