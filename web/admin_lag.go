package web

import (
	"context"
	"sync"
	"time"
)

// Lag history: every group's total lag, sampled in process so that the
// group view can draw lag over time without Prometheus. Bounded: at most
// lagSamples samples per group (2 h at the default 30 s) and lagMaxGroups
// groups; groups that disappear are dropped at the next sample.

const (
	lagEveryDefault = 30 * time.Second
	lagSamples      = 240
	lagMaxGroups    = 1000
)

type lagSample struct {
	Time time.Time `json:"time"`
	Lag  int64     `json:"lag"`
}

// lagRing is one group's samples, oldest first once full.
type lagRing struct {
	buf  [lagSamples]lagSample
	next int
	full bool
}

func (r *lagRing) add(s lagSample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % lagSamples
	r.full = r.full || r.next == 0
}

func (r *lagRing) samples() []lagSample {
	if !r.full {
		return append([]lagSample{}, r.buf[:r.next]...)
	}
	return append(append([]lagSample{}, r.buf[r.next:]...), r.buf[:r.next]...)
}

type lagHistory struct {
	mu     sync.Mutex
	groups map[string]*lagRing
	done   chan struct{} // closed when the sampler has stopped
}

func newLagHistory() *lagHistory {
	return &lagHistory{groups: map[string]*lagRing{}, done: make(chan struct{})}
}

// history is group's samples, oldest first; empty when none.
func (h *lagHistory) history(group string) []lagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.groups[group]; r != nil {
		return r.samples()
	}
	return []lagSample{}
}

// run samples every interval until ctx ends; it closes h.done on return.
func (h *lagHistory) run(ctx context.Context, g Groups, every time.Duration) {
	defer close(h.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.sample(ctx, g, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample records every group's total lag now.
func (h *lagHistory) sample(ctx context.Context, g Groups, now time.Time) {
	list := g.List()
	present := make(map[string]bool, len(list))
	totals := make(map[string]int64, len(list))
	for _, s := range list {
		if len(present) >= lagMaxGroups {
			break
		}
		present[s.Group] = true
		sctx, cancel := context.WithTimeout(ctx, apiTimeout)
		lags, err := g.Lag(sctx, s.Group)
		cancel()
		if err != nil {
			continue // a gap in its history
		}
		var total int64
		for _, l := range lags {
			total += l.Lag
		}
		totals[s.Group] = total
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.groups {
		if !present[name] {
			delete(h.groups, name)
		}
	}
	for name, total := range totals {
		r := h.groups[name]
		if r == nil {
			r = &lagRing{}
			h.groups[name] = r
		}
		r.add(lagSample{Time: now, Lag: total})
	}
}
