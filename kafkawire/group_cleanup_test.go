package kafkawire_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupEmptiedStaysUntilCleanup: as in Kafka, a group without commits
// whose last member left stays Empty (ListGroups and DescribeGroups show
// it, DeleteGroups deletes it), across a restart too, until the periodic
// cleanup removes it.
func TestGroupEmptiedStaysUntilCleanup(t *testing.T) {
	opts := groupOpts()
	opts.GroupCleanupInterval = time.Hour // the test runs the cleanup itself
	b := startBroker(t, opts)
	ctx := ctxT(t, 60*time.Second)
	const topic = "eg"
	if _, err := b.admin().CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceAll(t, b.client(kgo.DefaultProduceTopic(topic)), []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}})

	// One member joins, reads without committing, and leaves.
	joinAndLeave := func(grp string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("group %s read %d of 2 records", grp, got)
			}
			got += fs.NumRecords()
		}
		cl.Close() // LeaveGroup
	}
	adm := b.admin()
	state := func(grp string) string {
		t.Helper()
		ds, err := adm.DescribeGroups(ctx, grp)
		if err != nil {
			t.Fatal(err)
		}
		return ds[grp].State
	}
	listed := func(grp string) string {
		t.Helper()
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ls[grp].State
	}

	joinAndLeave("eg-g")
	if s, l := state("eg-g"), listed("eg-g"); s != "Empty" || l != "Empty" {
		t.Fatalf("right after the last member left: described %q, listed %q; want Empty", s, l)
	}
	joinAndLeave("eg-d")
	dr, err := adm.DeleteGroup(ctx, "eg-d")
	if err != nil || dr.Err != nil {
		t.Fatalf("DeleteGroups right after the last member left: %v %v", err, dr.Err)
	}
	if l := listed("eg-d"); l != "" {
		t.Fatalf("deleted group still listed as %q", l)
	}

	b.restart()
	if s := state("eg-g"); s != "Empty" {
		t.Fatalf("after a restart the emptied group is %q, want Empty", s)
	}
	n, err := b.eng.Groups().Cleanup(ctx)
	if err != nil || n != 1 {
		t.Fatalf("cleanup removed %d groups: %v", n, err)
	}
	if s, l := state("eg-g"), listed("eg-g"); s != "Dead" || l != "" {
		t.Fatalf("after the cleanup: described %q, listed %q; want Dead and not listed", s, l)
	}
}
