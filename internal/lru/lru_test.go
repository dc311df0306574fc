package lru

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// cost is the summed cost the cache accounts for.
func cost[K comparable, V any](c *Cache[K, V]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cost
}

// keys lists the cache's keys, most recently used first.
func keys[K comparable, V any](c *Cache[K, V]) []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []K
	for el := c.order.Front(); el != nil; el = el.Next() {
		out = append(out, el.Value.(*entry[K, V]).key)
	}
	return out
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](30)
	c.Add("a", 1, 10)
	c.Add("b", 2, 10)
	c.Add("c", 3, 10)
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("a missing before the cache is full")
	}
	c.Add("d", 4, 10) // evicts b, the least recently used
	if got := fmt.Sprint(keys(c)); got != "[d a c]" {
		t.Fatalf("order after evicting: %s, want [d a c]", got)
	}
	if _, ok := c.Get("b"); ok {
		t.Fatal("b survived eviction")
	}
	if v, ok := c.Get("c"); !ok || v != 3 {
		t.Fatalf("c = %d, %v; want 3, true", v, ok)
	}
	if len(keys(c)) != 3 || cost(c) != 30 {
		t.Fatalf("len %d cost %d, want 3 and 30", len(keys(c)), cost(c))
	}
}

func TestCostBound(t *testing.T) {
	c := New[int, string](100)
	for i := range 50 {
		c.Add(i, strings.Repeat("x", i), i)
		if cost(c) > 100 {
			t.Fatalf("after adding %d: cost %d exceeds 100", i, cost(c))
		}
	}
	// The newest entries stay: 49+48 = 97, and 47 more would exceed.
	if got := fmt.Sprint(keys(c)); got != "[49 48]" {
		t.Fatalf("kept %s, want [49 48]", got)
	}
}

func TestReplaceUpdatesCost(t *testing.T) {
	c := New[string, string](100)
	c.Add("a", "old", 60)
	c.Add("b", "b", 30)
	c.Add("a", "new", 20)
	if v, _ := c.Get("a"); v != "new" {
		t.Fatalf("a = %q, want new", v)
	}
	if len(keys(c)) != 2 || cost(c) != 50 {
		t.Fatalf("len %d cost %d, want 2 and 50", len(keys(c)), cost(c))
	}
	if got := fmt.Sprint(keys(c)); got != "[a b]" {
		t.Fatalf("order %s, want [a b]", got)
	}
}

func TestOversizeEntryNotKept(t *testing.T) {
	c := New[string, int](10)
	c.Add("a", 1, 5)
	c.Add("big", 2, 11)
	if _, ok := c.Get("big"); ok {
		t.Fatal("an entry over the whole bound was cached")
	}
	if _, ok := c.Get("a"); !ok || cost(c) != 5 {
		t.Fatalf("an oversize add disturbed the cache: cost %d", cost(c))
	}
	c.Add("a", 3, 11) // a refused replacement keeps the old value
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("a = %d, %v; want the old 1", v, ok)
	}
	c.Add("exact", 4, 10) // exactly the bound fits, alone
	if got := fmt.Sprint(keys(c)); got != "[exact]" || cost(c) != 10 {
		t.Fatalf("kept %s at cost %d, want [exact] at 10", got, cost(c))
	}
}

func TestKeepOversize(t *testing.T) {
	c := New[string, int](10, KeepOversize())
	c.Add("a", 1, 5)
	c.Add("big", 2, 11)
	if got := fmt.Sprint(keys(c)); got != "[big]" || cost(c) != 11 {
		t.Fatalf("kept %s at cost %d, want [big] at 11", got, cost(c))
	}
	c.Add("b", 3, 1) // the next add evicts the oversize entry
	if got := fmt.Sprint(keys(c)); got != "[b]" || cost(c) != 1 {
		t.Fatalf("kept %s at cost %d, want [b] at 1", got, cost(c))
	}
}

func TestRemove(t *testing.T) {
	type key struct {
		file string
		part int
	}
	c := New[key, int](100)
	for _, f := range []string{"x", "y"} {
		for p := range 3 {
			c.Add(key{f, p}, p, 5)
		}
	}
	c.Remove(key{"y", 0})
	c.Remove(key{"nope", 0})
	c.RemoveFunc(func(k key) bool { return k.file == "x" })
	if got := fmt.Sprint(keys(c)); got != "[{y 2} {y 1}]" || cost(c) != 10 {
		t.Fatalf("kept %s at cost %d, want [{y 2} {y 1}] at 10", got, cost(c))
	}
}

// TestConcurrent is for the race detector: the cold tier's readers share
// one cache.
func TestConcurrent(t *testing.T) {
	c := New[int, int](64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (g*7 + i) % 50
				if v, ok := c.Get(k); ok && v != k {
					t.Errorf("Get(%d) = %d", k, v)
					return
				}
				c.Add(k, k, 1+k%5)
				if i%100 == 0 {
					c.RemoveFunc(func(k int) bool { return k%10 == g })
				}
			}
		}()
	}
	wg.Wait()
	if cost(c) > 64 {
		t.Fatalf("cost %d exceeds 64", cost(c))
	}
	sum := 0
	for _, k := range keys(c) {
		sum += 1 + k%5
	}
	if sum != cost(c) || len(keys(c)) != len(c.byKey) {
		t.Fatalf("accounting drifted: entries cost %d, Cost() %d", sum, cost(c))
	}
}
