package kafkawire_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

func TestAdminAPIs(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	adm := b.admin()
	ctx := ctxT(t, 20*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "adm"); err != nil {
		t.Fatal(err)
	}
	// An idempotent producer (franz-go's default) leaves producer state.
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Value: []byte{byte(i)}})
	}
	produceAll(t, b.client(kgo.DefaultProduceTopic("adm")), recs)

	// DeleteRecords moves the log start; consumers start there.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("adm", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %+v", r)
	}
	if got := consumeN(t, b, "adm", 6); got[0].Offset != 4 {
		t.Fatalf("first offset after delete records: %d", got[0].Offset)
	}
	so, _ := adm.ListStartOffsets(ctx, "adm")
	if o, _ := so.Lookup("adm", 0); o.Offset != 4 {
		t.Fatalf("start offset %d", o.Offset)
	}

	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"adm": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := dp["adm"].Partitions[0]
	if !ok || len(ps.ActiveProducers) != 1 || ps.ActiveProducers.Sorted()[0].LastSequence != 9 {
		t.Fatalf("producers: %+v", ps)
	}

	ld, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil || len(ld) != 1 || ld[0].Error() != nil {
		t.Fatalf("log dirs: %v %v", err, ld)
	}
	size := int64(-1)
	ld.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "adm" {
				size = p.Size
			}
		})
	})
	if size <= 0 {
		t.Fatalf("log dir size of adm: %d", size)
	}

	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "adm"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	_, rp.LeaderEpoch = b.eng.Topic("adm").Partition(0).Leader() // the current epoch: ends at the log end
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	oe, err := req.RequestWith(ctx, b.client())
	if err != nil || oe.Topics[0].Partitions[0].EndOffset != 10 || oe.Topics[0].Partitions[0].LeaderEpoch != rp.LeaderEpoch {
		t.Fatalf("offset for leader epoch %d: %v %+v", rp.LeaderEpoch, err, oe)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, b.client())
	if err != nil || dcr.ClusterID != b.eng.ClusterID() || len(dcr.Brokers) != 1 {
		t.Fatalf("describe cluster: %v %+v", err, dcr)
	}
}
