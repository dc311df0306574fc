package kafkawire_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/resp"
)

// crashDialer lets a test cut a client off: every connection closed, no
// new one allowed, as when its process dies.
type crashDialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	crashed bool
}

func (d *crashDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil, fmt.Errorf("crashed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		c.Close()
	}
}

type tp struct {
	p   int32
	off int64
}

// Five franz-go share consumers on a 4-partition topic, one of them
// crashing while it holds records: every record is delivered and accepted
// once; the crashed member's records come back only after their lock
// expired, with delivery count 2 (as XPENDING shows before they are
// accepted); at the end Redis's XPENDING and XINFO GROUPS agree with
// korvet's view: nothing pending, every record delivered.
func TestShareGroupFiveConsumersOneCrashes(t *testing.T) {
	const (
		lock       = 3 * time.Second
		partitions = 4
		total      = 400
	)
	t0 := time.Now()
	b := startBroker(t, engine.Options{AutoCreateTopics: true, Share: engine.ShareOptions{LockDuration: lock}})
	if _, err := b.admin().CreateTopic(ctxT(t, 10*time.Second), partitions, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range total {
		recs = append(recs, &kgo.Record{Topic: "jobs", Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))})
	}
	produceAll(t, b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), recs)
	setGroupConfig(t, b, "workers", "share.auto.offset.reset", "earliest")
	ctx := ctxT(t, 90*time.Second)
	stream := func(p int32) string { return b.eng.Keyspace() + ":storage:local:jobs:" + strconv.Itoa(int(p)) + ":0" }

	// The crasher takes some records and dies holding them.
	d := &crashDialer{}
	crasher, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.Dialer(d.dial), kgo.ClientID("crasher"),
		kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ShareMaxRecords(10))
	if err != nil {
		t.Fatal(err)
	}
	var crasherGot int
	for crasherGot == 0 {
		if ctx.Err() != nil {
			t.Fatal("crasher got nothing")
		}
		f := crasher.PollFetches(ctx)
		crasherGot = f.NumRecords()
	}
	crasherID := ""
	g, ok := b.eng.ShareDescribe("workers")
	for _, m := range g.Members {
		if m.ClientID == "crasher" {
			crasherID = m.ID
		}
	}
	if !ok || crasherID == "" {
		t.Fatalf("crasher not in the group: %+v", g)
	}
	d.crash()
	// What the crasher holds, from Redis: offset -> when it was acquired.
	// A ShareFetch of the crasher's may still be in korvet when it dies:
	// read until two looks a poll interval apart agree.
	heldNow := func() map[tp]time.Time {
		return crasherHolds(t, b, ctx, stream, partitions, crasherID)
	}
	held := heldNow()
	for stable := false; !stable; {
		if ctx.Err() != nil {
			t.Fatal("the crasher's holdings never settled")
		}
		time.Sleep(300 * time.Millisecond)
		again := heldNow()
		stable = len(again) == len(held)
		held = again
	}
	if len(held) < crasherGot {
		t.Fatalf("crasher polled %d records but holds %d in Redis", crasherGot, len(held))
	}
	go crasher.Close() // its dials fail: it cannot leave or acknowledge

	// Four healthy consumers accept everything they get.
	type delivery struct {
		member int
		at     time.Time
		count  int32
	}
	var mu sync.Mutex
	deliveries := map[tp][]delivery{}
	var redis2 []string // problems seen in XPENDING at redelivery
	accepted := map[tp]int{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var clients []*kgo.Client
	for i := range 4 {
		cl := b.client(kgo.ClientID("worker-"+strconv.Itoa(i)), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ShareMaxRecords(25))
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				f := cl.PollFetches(pctx)
				cancel()
				now := time.Now()
				f.EachRecord(func(r *kgo.Record) {
					k := tp{r.Partition, r.Offset}
					if r.DeliveryCount() > 1 {
						// Before accepting: Redis shows the new owner
						// and the delivery count the client saw.
						id := strconv.FormatInt(r.Offset, 10)
						x, err := b.rc.Do(ctx, "XPENDING", stream(r.Partition), "share:workers", id, id, 1)
						var ents, fl []resp.Reply
						if err == nil {
							ents = x.Elems(ents)
						}
						problem := ""
						if len(ents) != 1 {
							problem = fmt.Sprintf("%v: not pending at redelivery (%v)", k, err)
						} else {
							fl = ents[0].Elems(fl)
							n, _ := fl[3].Int()
							if n != int64(r.DeliveryCount()) || string(fl[1].Bytes()) == crasherID {
								problem = fmt.Sprintf("%v: XPENDING owner %s count %d, client saw count %d", k, fl[1].Bytes(), n, r.DeliveryCount())
							}
						}
						if problem != "" {
							mu.Lock()
							redis2 = append(redis2, problem)
							mu.Unlock()
						}
					}
					mu.Lock()
					deliveries[k] = append(deliveries[k], delivery{i, now, r.DeliveryCount()})
					accepted[k]++
					mu.Unlock()
					r.Ack(kgo.AckAccept)
				})
			}
		}()
	}
	for {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		if n == total {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d records accepted", n, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, cl := range clients {
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatalf("flush acks: %v", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range redis2 {
		t.Error(p)
	}
	for k, ds := range deliveries {
		if len(ds) != 1 {
			t.Errorf("%v delivered %d times to healthy members: %+v", k, len(ds), ds)
			continue
		}
		if acquiredAt, ok := held[k]; ok {
			if ds[0].count != 2 {
				t.Errorf("crashed member's record %v redelivered with count %d, want 2", k, ds[0].count)
			}
			if early := acquiredAt.Add(lock).Sub(ds[0].at); early > 100*time.Millisecond {
				t.Errorf("crashed member's record %v redelivered %v before its lock expired", k, early)
			}
		} else if ds[0].count != 1 {
			t.Errorf("record %v delivered with count %d, want 1", k, ds[0].count)
		}
	}

	// Redis and korvet agree: nothing pending, every entry delivered.
	var acceptedN int64
	for p := int32(0); p < partitions; p++ {
		part := b.eng.Topic("jobs").Partition(p)
		var st engine.SharePartitionState
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err = b.eng.ShareState(ctx, "workers", part)
			if err != nil {
				t.Fatal(err)
			}
			if st.InFlight == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		hw := part.HighWatermark()
		if st.InFlight != 0 || st.StartOffset != hw || st.Lag != 0 {
			t.Errorf("partition %d: korvet's view %+v, want nothing in flight and start %d", p, st, hw)
		}
		acceptedN += st.Accepted
		sum, err := b.rc.Do(ctx, "XPENDING", stream(p), "share:workers")
		if err != nil {
			t.Fatal(err)
		}
		var sf []resp.Reply
		sf = sum.Elems(sf)
		if n, _ := sf[0].Int(); n != st.InFlight {
			t.Errorf("partition %d: XPENDING says %d pending, korvet %d", p, n, st.InFlight)
		}
		info, err := b.rc.Do(ctx, "XINFO", "GROUPS", stream(p))
		if err != nil {
			t.Fatal(err)
		}
		var groups, kv []resp.Reply
		groups = info.Elems(groups)
		if len(groups) != 1 {
			t.Fatalf("partition %d: %d consumer groups", p, len(groups))
		}
		kv = groups[0].Elems(kv)
		fields := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			fields[string(kv[i].Bytes())] = string(kv[i+1].Bytes())
		}
		last, _, _ := strings.Cut(fields["last-delivered-id"], "-")
		if fields["name"] != "share:workers" || fields["pending"] != "0" || last != strconv.FormatInt(hw-1, 10) {
			t.Errorf("partition %d: XINFO GROUPS %v, want share:workers, 0 pending, last delivered offset %d", p, fields, hw-1)
		}
	}
	if acceptedN != total {
		t.Errorf("korvet counted %d accepted, want %d", acceptedN, total)
	}
	t.Logf("%v crasher held %d records; all %d accepted once", time.Since(t0), len(held), total)
}

// crasherHolds reads from Redis what a member holds: offset -> when it
// acquired it (now minus the entry's idle time).
func crasherHolds(t *testing.T, b *broker, ctx context.Context, stream func(int32) string, partitions int32, member string) map[tp]time.Time {
	t.Helper()
	held := map[tp]time.Time{}
	now := time.Now()
	for p := int32(0); p < partitions; p++ {
		r, err := b.rc.Do(ctx, "XPENDING", stream(p), "share:workers", "-", "+", 1000)
		if err != nil || r.Err() != nil {
			continue // no group on this partition yet
		}
		var ents []resp.Reply
		ents = r.Elems(ents)
		for _, e := range ents {
			var f []resp.Reply
			f = e.Elems(f)
			id := string(f[0].Bytes())
			off, _ := strconv.ParseInt(id[:len(id)-2], 10, 64)
			idle, _ := f[2].Int()
			if string(f[1].Bytes()) == member {
				held[tp{p, off}] = now.Add(-time.Duration(idle) * time.Millisecond)
			}
		}
	}
	return held
}
