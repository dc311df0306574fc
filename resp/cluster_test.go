package resp_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func clusterClient(t *testing.T, rc *testbed.RedisCluster) *resp.Client {
	t.Helper()
	return newClient(t, rc.URL, resp.Options{Cluster: true, Seeds: rc.Seeds, Logger: testbed.Logger()})
}

// keysOnOtherNodes returns two keys whose slots different masters serve.
func keysOnOtherNodes(t *testing.T, rc *testbed.RedisCluster) (string, string) {
	t.Helper()
	a := "a0"
	na := rc.MasterOf(t, a)
	for i := range 1000 {
		b := "b" + strconv.Itoa(i)
		if rc.MasterOf(t, b) != na {
			return a, b
		}
	}
	t.Fatal("no key on another master")
	return "", ""
}

// TestCluster runs the routing, redirect and topology checks on one
// 3-master, 3-replica cluster.
func TestCluster(t *testing.T) {
	rc := testbed.StartRedisCluster(t, 3, 1)
	c := clusterClient(t, rc)
	ctx := ctxT(t)
	if !c.IsCluster() {
		t.Fatal("IsCluster false")
	}

	t.Run("Routing", func(t *testing.T) {
		var p resp.Pipeline
		const n = 1000
		for i := range n {
			p.Cmd("SET", "key:"+strconv.Itoa(i), "v"+strconv.Itoa(i))
			p.Cmd("GET", "key:"+strconv.Itoa(i))
		}
		rs, err := c.Exec(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Len() != 2*n {
			t.Fatalf("%d replies for %d commands", rs.Len(), 2*n)
		}
		for i := range n {
			if got := string(rs.At(2 * i).Bytes()); got != "OK" {
				t.Fatalf("SET %d: %q", i, got)
			}
			if got, want := string(rs.At(2*i+1).Bytes()), "v"+strconv.Itoa(i); got != want {
				t.Fatalf("GET %d: %q, want %q", i, got, want)
			}
		}
		rs.Release()
		total := int64(0)
		for _, m := range rc.Nodes[:rc.Masters] {
			r, err := c.DoNode(ctx, m.Addr, "DBSIZE")
			if err != nil {
				t.Fatal(err)
			}
			k, _ := r.Int()
			if k < n/10 {
				t.Fatalf("master %s holds %d of %d keys", m.Addr, k, n)
			}
			total += k
		}
		if total != n {
			t.Fatalf("masters hold %d keys, want %d", total, n)
		}

		// DEL over many slots is split per slot and the counts summed.
		del := []any{"DEL"}
		for i := range n {
			del = append(del, "key:"+strconv.Itoa(i))
		}
		del = append(del, "no-such-key")
		if r := mustDo(t, c, del...); resp.Kind(r.Type) != resp.KindInteger || string(r.Bytes()) != strconv.Itoa(n) {
			t.Fatalf("DEL of %d keys: %q", n, r.Raw)
		}
		if r := mustDo(t, c, "EXISTS", "key:1", "key:2"); string(r.Bytes()) != "0" {
			t.Fatalf("EXISTS after DEL: %q", r.Raw)
		}
	})

	t.Run("Multi", func(t *testing.T) {
		a, b := keysOnOtherNodes(t, rc)
		var p resp.Pipeline
		p.Cmd("MULTI")
		p.Cmd("SET", a, "1")
		p.Cmd("SET", b, "1")
		p.Cmd("EXEC")
		_, err := c.Exec(ctx, &p)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(a)) || !strings.Contains(err.Error(), strconv.Quote(b)) ||
			!strings.Contains(err.Error(), fmt.Sprintf("slot %d", resp.Slot(a))) {
			t.Fatalf("cross-slot MULTI: %v", err)
		}
		if r := mustDo(t, c, "EXISTS", a, b); string(r.Bytes()) != "0" {
			t.Fatalf("a refused MULTI block wrote keys: EXISTS %q", r.Raw)
		}

		// Same slot by hash tag, with other commands around it.
		p.Reset()
		p.Cmd("SET", a, "before")
		p.Cmd("MULTI")
		p.Cmd("INCR", "{tag}x")
		p.Cmd("INCRBY", "{tag}y", 5)
		p.Cmd("EXEC")
		p.Cmd("GET", b)
		rs, err := c.Exec(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		ex := rs.At(4).Elems(nil)
		if len(ex) != 2 || string(ex[0].Bytes()) != "1" || string(ex[1].Bytes()) != "5" || !rs.At(5).IsNil() {
			t.Fatalf("EXEC %q, GET %q", rs.At(4).Raw, rs.At(5).Raw)
		}
		rs.Release()
	})

	t.Run("Conn", func(t *testing.T) {
		a, b := keysOnOtherNodes(t, rc)
		pc, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		mustDo(t, pc, "WATCH", "{w}k")
		mustDo(t, pc, "GET", "{w}k")
		mustDo(t, pc, "MULTI")
		mustDo(t, pc, "SET", "{w}k", "1")
		r := mustDo(t, pc, "EXEC")
		if r.Len() != 1 {
			t.Fatalf("EXEC: %q", r.Raw)
		}
		// WATCH sees a write from another connection.
		mustDo(t, pc, "WATCH", "{w}k")
		mustDo(t, c, "SET", "{w}k", "2")
		mustDo(t, pc, "MULTI")
		mustDo(t, pc, "SET", "{w}k", "3")
		if r := mustDo(t, pc, "EXEC"); !r.IsNilArray() {
			t.Fatalf("EXEC after a write to a WATCHed key: %q", r.Raw)
		}
		pc.Close()

		// A Conn stays on its node: a key of another is refused unsent.
		pc2, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pc2.Close()
		mustDo(t, pc2, "GET", a)
		if _, err := pc2.Do(ctx, "SET", b, "x"); !resp.IsRedirect(err) || !strings.Contains(err.Error(), strconv.Quote(b)) {
			t.Fatalf("Conn on %s with key %q of another node: %v", rc.MasterOf(t, a).Addr, b, err)
		}
		if r := mustDo(t, c, "EXISTS", b); string(r.Bytes()) != "0" {
			t.Fatal("the refused command was sent")
		}
	})

	t.Run("Topology", func(t *testing.T) {
		shards, err := c.Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		masters, err := c.Masters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(shards) != 3 || len(masters) != 3 {
			t.Fatalf("%d shards, %d masters", len(shards), len(masters))
		}
		want := map[string]bool{}
		for _, m := range rc.Nodes[:rc.Masters] {
			want[m.Addr] = true
		}
		slots := 0
		for _, sh := range shards {
			if !want[sh.Master] || len(sh.Nodes) != 2 || sh.Nodes[0].Role != "master" || sh.Nodes[1].Role != "replica" ||
				sh.ID != rc.NodeID(rc.MasterOf(t, "x")) && sh.ID == "" {
				t.Fatalf("shard %+v", sh)
			}
			slots += sh.SlotCount()
			if _, err := c.DoNode(ctx, sh.Nodes[1].Addr, "INFO", "replication"); err != nil {
				t.Fatalf("DoNode on replica: %v", err)
			}
		}
		if slots != resp.SlotCount {
			t.Fatalf("shards serve %d slots", slots)
		}
		for _, m := range masters {
			if !want[m] {
				t.Fatalf("Masters %v", masters)
			}
		}
		if _, err := c.DoNode(ctx, "127.0.0.1:1", "PING"); err == nil {
			t.Fatal("DoNode on a stranger succeeded")
		}
		if err := c.ScriptLoad(ctx, "return 1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Moved", func(t *testing.T) {
		mustDo(t, c, "SET", "mv", "1")
		from := rc.MasterOf(t, "mv")
		to := rc.Nodes[0]
		if to == from {
			to = rc.Nodes[1]
		}
		before := c.Stats()
		rc.MoveSlot(t, resp.Slot("mv"), to)
		// The client still has the old map: the command follows MOVED.
		if r := mustDo(t, c, "INCR", "mv"); string(r.Bytes()) != "2" {
			t.Fatalf("INCR after the move: %q", r.Raw)
		}
		if got := c.Stats(); got.Moved <= before.Moved {
			t.Fatalf("Stats %+v, before %+v", got, before)
		}
		testbed.WaitFor(t, 5*time.Second, "map refreshed after MOVED", func() bool { return c.Stats().Refreshes > before.Refreshes })

		// A Conn gets MOVED as its reply, and a new Conn goes to the new node.
		pc, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		mustDo(t, pc, "GET", "mv")
		back := rc.Nodes[0]
		if back == to {
			back = rc.Nodes[1]
		}
		moved := c.Stats().Moved
		rc.MoveSlot(t, resp.Slot("mv"), back)
		if _, err := pc.Do(ctx, "GET", "mv"); !resp.IsRedirect(err) {
			t.Fatalf("Conn GET after its slot moved: %v", err)
		}
		if c.Stats().Moved != moved+1 {
			t.Fatalf("Conn's MOVED not counted: %+v", c.Stats())
		}
		pc.Close()
		pc2, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pc2.Close()
		if r := mustDo(t, pc2, "GET", "mv"); string(r.Bytes()) != "2" {
			t.Fatalf("new Conn GET: %q", r.Raw)
		}
	})

	t.Run("Ask", func(t *testing.T) {
		mustDo(t, c, "SET", "{ask}1", "a")
		mustDo(t, c, "SET", "{ask}2", "b")
		slot := resp.Slot("{ask}1")
		from := rc.MasterOf(t, "{ask}1")
		to := rc.Nodes[0]
		if to == from {
			to = rc.Nodes[1]
		}
		before := c.Stats()
		rc.BeginMigration(t, slot, to)
		rc.MigrateKeys(t, slot, from, to, "{ask}1")
		// {ask}1 moved: from answers ASK; {ask}2 is still served there.
		var p resp.Pipeline
		p.Cmd("GET", "{ask}1")
		p.Cmd("GET", "{ask}2")
		p.Cmd("APPEND", "{ask}1", "x")
		rs, err := c.Exec(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if a, b, n := string(rs.At(0).Bytes()), string(rs.At(1).Bytes()), string(rs.At(2).Bytes()); a != "a" || b != "b" || n != "2" {
			t.Fatalf("during migration: %q %q %q", a, b, n)
		}
		rs.Release()
		if got := c.Stats(); got.Ask < before.Ask+2 || got.Moved != before.Moved {
			t.Fatalf("Stats %+v, before %+v", got, before)
		}
		rc.EndMigration(t, slot, to)
		if r := mustDo(t, c, "GET", "{ask}1"); string(r.Bytes()) != "ax" {
			t.Fatalf("after migration: %q", r.Raw)
		}
	})
	t.Run("ConnAsk", func(t *testing.T) {
		// A Conn whose WATCH meets ASK follows it and runs its
		// transaction on the importing node, as an append round does.
		mustDo(t, c, "SET", "{cask}meta", "1")
		mustDo(t, c, "SET", "{cask}log", "a")
		slot := resp.Slot("{cask}meta")
		from := rc.MasterOf(t, "{cask}meta")
		to := rc.Nodes[0]
		if to == from {
			to = rc.Nodes[1]
		}
		rc.BeginMigration(t, slot, to)
		rc.MigrateKeys(t, slot, from, to, "{cask}meta", "{cask}log")
		cn, err := c.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var check, tx resp.Pipeline
		check.Cmd("WATCH", "{cask}meta")
		check.Cmd("GET", "{cask}meta")
		rs, err := cn.Exec(ctx, &check)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Len() != 2 || rs.At(0).Err() != nil || string(rs.At(1).Bytes()) != "1" {
			t.Fatalf("check on a migrating slot: %d replies, %v %q", rs.Len(), rs.At(0).Err(), rs.At(1).Raw)
		}
		rs.Release()
		tx.Cmd("MULTI")
		tx.Cmd("INCR", "{cask}meta")
		tx.Cmd("APPEND", "{cask}log", "b")
		tx.Cmd("EXEC")
		rs, err = cn.Exec(ctx, &tx)
		if err != nil {
			t.Fatal(err)
		}
		if ex := rs.At(3); ex.Err() != nil || ex.Len() != 2 {
			t.Fatalf("EXEC on the importing node: %v %q", ex.Err(), ex.Raw)
		}
		rs.Release()
		// A key of another slot is refused unsent, as a redirect.
		var other resp.Pipeline
		other.Cmd("GET", "elsewhere")
		if _, err := cn.Exec(ctx, &other); !resp.IsRedirect(err) {
			t.Fatalf("a key outside the followed slot: %v", err)
		}
		cn.Close()
		rc.EndMigration(t, slot, to)
		if r := mustDo(t, c, "GET", "{cask}log"); string(r.Bytes()) != "ab" {
			t.Fatalf("after migration: %q", r.Raw)
		}
		if r, err := c.DoNode(ctx, to.Addr, "GET", "{cask}meta"); err != nil || string(r.Bytes()) != "2" {
			t.Fatalf("the importing node holds %q, %v", r.Raw, err)
		}
	})
}

// TestClusterClose: Close stops the refresher and every node's pool.
func TestClusterClose(t *testing.T) {
	rc := testbed.StartRedisCluster(t, 3, 0)
	before := runtime.NumGoroutine()
	c, err := resp.New(rc.URL, resp.Options{Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	var p resp.Pipeline
	for i := range 100 {
		p.Cmd("SET", "close:"+strconv.Itoa(i), i)
	}
	rs, err := c.Exec(ctxT(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctxT(t), "GET", "close:1"); !errors.Is(err, resp.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	if _, err := c.Conn(ctxT(t)); !errors.Is(err, resp.ErrClosed) {
		t.Fatalf("Conn after Close: %v", err)
	}
	testbed.WaitFor(t, 5*time.Second, "goroutines gone after Close", func() bool { return runtime.NumGoroutine() <= before })

	if _, err := resp.New(strings.Replace(rc.URL, "/0", "/1", 1), resp.Options{Cluster: true}); err == nil || !strings.Contains(err.Error(), "db") {
		t.Fatalf("cluster URL with db 1: %v", err)
	}
}

// TestClusterFailover: writes to a killed master's slots resume, on the
// same Client, once a replica took over.
func TestClusterFailover(t *testing.T) {
	rc := testbed.StartRedisCluster(t, 3, 1)
	c := clusterClient(t, rc)
	mustDo(t, c, "SET", "fo", "0")
	dead := rc.MasterOf(t, "fo")
	rc.Kill(t, dead)

	var writes, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := c.Do(ctx, "INCR", "fo")
			cancel()
			if err == nil {
				writes.Add(1)
				continue
			}
			failures.Add(1)
			if !resp.IsConnError(err) && !resp.IsRedirect(err) {
				t.Errorf("write during failover: %v", err)
				return
			}
		}
	}()
	start := time.Now()
	promoted := rc.WaitPromoted(t, dead)
	t.Logf("replica %s promoted after %v", promoted.Addr, time.Since(start))
	// The same Client writes again: its map followed the failover.
	w := writes.Load()
	testbed.WaitFor(t, 10*time.Second, "writes after the failover", func() bool { return writes.Load() > w+10 })
	close(stop)
	wg.Wait()
	t.Logf("failover: %d writes failed, %d succeeded; stats %+v", failures.Load(), writes.Load(), c.Stats())
	if failures.Load() == 0 {
		t.Fatal("no write failed while the master was dead")
	}
	shards, err := c.Shards(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sh := range shards {
		if sh.Master == dead.Addr {
			t.Fatalf("dead master still in Shards: %+v", sh)
		}
		if sh.Master == promoted.Addr && sh.SlotCount() > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("promoted %s not a master in %+v", promoted.Addr, shards)
	}
	if r := mustDo(t, c, "GET", "fo"); r.IsNil() {
		t.Fatal("fo lost")
	}
}

// TestClusterReshardUnderLoad: a writer pipelines INCRs of 100 counters
// while 2000 slots move; no write is lost or doubled.
func TestClusterReshardUnderLoad(t *testing.T) {
	rc := testbed.StartRedisCluster(t, 3, 0)
	c := clusterClient(t, rc)
	const counters = 100
	key := func(i int) string { return "{ctr" + strconv.Itoa(i) + "}" }
	var ok [counters]int64
	var redirects, unknown, rounds atomic.Int64
	var unknownPer [counters]int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var p resp.Pipeline
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.Reset()
			for i := range counters {
				p.Cmd("INCR", key(i))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rs, err := c.Exec(ctx, &p)
			cancel()
			rounds.Add(1)
			if err != nil {
				if !errors.Is(err, resp.ErrUnknownOutcome) {
					t.Errorf("Exec: %v", err)
					return
				}
				unknown.Add(1)
				for i := range counters {
					unknownPer[i]++
				}
				continue
			}
			for i := range counters {
				r := rs.At(i)
				if err := r.Err(); err != nil {
					if !resp.IsRedirect(err) {
						t.Errorf("INCR %s: %v", key(i), err)
					}
					redirects.Add(1)
					continue
				}
				ok[i]++
			}
			rs.Release()
		}
	}()
	testbed.WaitFor(t, 10*time.Second, "writer running", func() bool { return rounds.Load() > 10 })
	start := time.Now()
	rc.Reshard(t, rc.Nodes[0], rc.Nodes[1], 2000)
	took := time.Since(start)
	testbed.WaitFor(t, 10*time.Second, "writer runs after the reshard", func() bool { return rounds.Load() > 20 })
	close(stop)
	wg.Wait()
	st := c.Stats()
	t.Logf("reshard of 2000 slots took %v; %d pipelines of %d INCRs, %d redirect replies and %d unknown outcomes reached the writer; stats %+v",
		took, rounds.Load(), counters, redirects.Load(), unknown.Load(), st)
	if st.Moved+st.Ask == 0 {
		t.Error("no redirect followed during the reshard")
	}
	for i := range counters {
		r := mustDo(t, c, "GET", key(i))
		got, err := r.Int()
		if err != nil {
			t.Fatal(err)
		}
		if got < ok[i] || got > ok[i]+unknownPer[i] {
			t.Errorf("counter %s = %d, %d INCRs succeeded (%d unknown)", key(i), got, ok[i], unknownPer[i])
		}
	}
}

// A pipeline that stays on one node costs no allocation per command.
func TestClusterExecAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	rc := testbed.StartRedisCluster(t, 3, 0)
	c := clusterClient(t, rc)
	var p resp.Pipeline
	run := func() {
		p.Reset()
		for i := range 1000 {
			p.Array(3)
			p.String("SET")
			p.String("{one}k")
			p.Int(int64(i))
			p.Array(2)
			p.String("GET")
			p.String("{one}k")
		}
		rs, err := c.Exec(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}
	run()
	if n := testbed.Allocs(20, run); n > 2 {
		t.Fatalf("%v allocations per 2000-command Exec on one node", n)
	}
}

// TestClusterOfOneNode: a node alone in its cluster announces no IP (it
// learns its address from peers); the client uses the host it reached
// it at.
func TestClusterOfOneNode(t *testing.T) {
	r := testbed.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	plain, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx := ctxT(t)
	if _, err := plain.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, resp.SlotCount-1); err != nil {
		t.Fatal(err)
	}
	testbed.WaitFor(t, 10*time.Second, "a cluster of one node is ok", func() bool {
		r, err := plain.Do(ctx, "CLUSTER", "INFO")
		return err == nil && strings.Contains(string(r.Bytes()), "cluster_state:ok")
	})
	c := newClient(t, r.URL, resp.Options{Cluster: true})
	mustDo(t, c, "SET", "one", "node")
	if got := mustDo(t, c, "GET", "one"); string(got.Bytes()) != "node" {
		t.Fatalf("GET: %q", got.Raw)
	}
	shards, err := c.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 1 || shards[0].Master != r.Addr || shards[0].SlotCount() != resp.SlotCount {
		t.Fatalf("shards %+v, want one at %s with every slot", shards, r.Addr)
	}
}
