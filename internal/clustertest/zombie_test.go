package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/kafkaload"
)

// TestZombieLeader: a leader is SIGSTOPped with produce requests in
// flight (and more arriving in its socket while it is stopped) and stays
// stopped past its lease; the others take its partitions over and accept
// writes; then it is continued (SIGCONT). Nothing it had in flight lands
// after the takeover: each of its requests is either answered with an
// error and absent from the log, or answered with success and in the log
// once, at its offset, before the new leader's records. Its clients move
// on: the producer that was sending to it carries on with no failure.
func TestZombieLeader(t *testing.T) {
	needCluster(t)
	c := startCluster(t, 3)
	const topic = "zombie"
	c.createTopic(topic, partitions, nil)
	w := &workload{t: t, c: c, topic: topic}
	// Short request timeouts: the producer gives up on the stalled broker
	// and retries elsewhere within seconds.
	w.lp = kafkaload.StartProducer(t, c.seeds(), topic, kafkaload.Options{Client: []kgo.Opt{kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(time.Second)}})
	w.lp.WaitMore(t, 300, 30*time.Second)

	zombie, led := w.busiest()
	p := led[0]
	rp, err := dialRaw(zombie.KafkaAddr, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.close()

	// A stream of produce requests to the leader: some answered before
	// the stop, some in flight at it, some sent while it is stopped.
	stopSending := make(chan struct{})
	sendDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopSending:
				sendDone <- nil
				return
			default:
			}
			if err := rp.send(p, fmt.Sprintf("zombie=%d", i)); err != nil {
				sendDone <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	testbed.Eventually(t, 10*time.Second, "answers before the stop", func() (bool, string) {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		return len(rp.answers) >= 20, fmt.Sprintf("%d answers", len(rp.answers))
	})
	zombie.Pause()
	paused := time.Now()
	t.Logf("SIGSTOP node %d, leader of %v, with %d raw produce requests unanswered", zombie.NodeID, led, rp.unanswered())
	// More requests reach its socket while it is stopped.
	sentAtStop := rp.sentCount()
	testbed.Eventually(t, 10*time.Second, "requests sent to the stopped broker", func() (bool, string) {
		n := rp.sentCount() - sentAtStop
		return n >= 20, fmt.Sprintf("%d sent", n)
	})
	close(stopSending)
	if err := <-sendDone; err != nil {
		t.Fatalf("raw produce: %v", err)
	}

	// The others take over once its lease lapses and accept writes.
	c.waitLeaders(topic, partitions, 30*time.Second, func(m map[int32]int32) bool { return len(kafkaload.LedBy(m, zombie.NodeID)) == 0 })
	measureFailover(t, w.lp, fmt.Sprintf("SIGSTOP of node %d", zombie.NodeID), paused, led, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(2*time.Second), kgo.RequestTimeoutOverhead(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	extra := map[string]int64{}
	var takeover int64 = -1 // the first offset the new leader wrote on p
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "after=%d", i)}).First()
		cancel()
		if err != nil {
			t.Fatalf("produce to partition %d after the takeover: %v", p, err)
		}
		extra[string(r.Value)] = r.Offset
		if takeover < 0 {
			takeover = r.Offset
		}
	}

	// SIGCONT: every raw request gets its answer (or the connection ends).
	zombie.Resume()
	testbed.Eventually(t, 30*time.Second, "answers to the zombie's requests", func() (bool, string) {
		rp.mu.Lock()
		defer rp.mu.Unlock()
		n := len(rp.sent) - len(rp.answers)
		return n == 0 || rp.readErr != nil, fmt.Sprintf("%d unanswered", n)
	})
	rp.mu.Lock()
	var before, failed, none int
	for corr, s := range rp.sent {
		a, ok := rp.answers[corr]
		switch {
		case !ok:
			none++
			extra[s.value] = kafkaload.Unanswered
		case a.code != 0:
			failed++
			extra[s.value] = -1
			if err := kerr.ErrorForCode(a.code); !kerr.IsRetriable(err) {
				t.Errorf("%s: the zombie answered %v, not a retriable error", s.value, err)
			}
		default:
			extra[s.value] = a.offset
			if s.at.After(paused) || a.offset >= takeover {
				t.Errorf("%s (sent %v after the stop) written by the zombie at %d/%d; the new leader wrote from %d", s.value, s.at.Sub(paused).Round(time.Millisecond), p, a.offset, takeover)
			} else {
				before++
			}
		}
	}
	readErr := rp.readErr
	rp.mu.Unlock()
	t.Logf("zombie's raw requests: %d written before the stop, %d failed, %d never answered (connection: %v)", before, failed, none, readErr)
	if failed+none == 0 {
		t.Error("no raw request was in flight at the stop: the test proved nothing")
	}

	// Its clients move on: the producer keeps getting acknowledgements,
	// the zombie registers again.
	w.lp.WaitMore(t, 300, 30*time.Second)
	c.waitBrokers(topic, []int32{1, 2, 3}, 30*time.Second)
	acked := w.lp.Finish(t)
	kafkaload.CheckLog(t, c.seeds(), c.adm, topic, kafkaload.Check{Acked: acked, Extra: extra})
}
