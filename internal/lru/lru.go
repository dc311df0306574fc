// Package lru is a least-recently-used cache bounded by the summed cost
// (usually bytes) of its entries.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values, evicting the least recently used entries
// once their summed cost exceeds the bound. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	maxCost      int
	keepOversize bool

	mu    sync.Mutex
	cost  int
	order *list.List // of *entry[K, V], most recent first
	byKey map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int
}

// Option tunes a Cache.
type Option func(*options)

type options struct{ keepOversize bool }

// KeepOversize keeps an entry that alone costs more than the bound (it
// evicts everything else and goes with the next Add), instead of not
// caching it: for values that are costly to rebuild.
func KeepOversize() Option { return func(o *options) { o.keepOversize = true } }

// New returns an empty cache that keeps entries costing at most maxCost in
// total.
func New[K comparable, V any](maxCost int, opts ...Option) *Cache[K, V] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Cache[K, V]{
		maxCost:      maxCost,
		keepOversize: o.keepOversize,
		order:        list.New(),
		byKey:        make(map[K]*list.Element),
	}
}

// Get returns the value under key and marks it most recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Add puts val under key as the most recently used entry, replacing what
// was there, and evicts the least recently used entries while the total
// cost exceeds the bound. Without KeepOversize an entry costing more than
// the bound is not added (and an older value under key stays).
func (c *Cache[K, V]) Add(key K, val V, cost int) {
	if cost > c.maxCost && !c.keepOversize {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
	c.byKey[key] = c.order.PushFront(&entry[K, V]{key: key, val: val, cost: cost})
	c.cost += cost
	for c.cost > c.maxCost && c.order.Len() > 1 {
		c.remove(c.order.Back())
	}
}

// Remove drops the entry under key, if any.
func (c *Cache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.remove(el)
	}
}

// RemoveFunc drops every entry whose key drop reports true.
func (c *Cache[K, V]) RemoveFunc(drop func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.byKey {
		if drop(k) {
			c.remove(el)
		}
	}
}

func (c *Cache[K, V]) remove(el *list.Element) {
	e := c.order.Remove(el).(*entry[K, V])
	delete(c.byKey, e.key)
	c.cost -= e.cost
}
