package kafkawire_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

func TestDescribeAndAlterConfigs(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true, TopicDefaults: map[string]string{"retention.bytes": "5000000"}})
	adm := b.admin()
	ctx := ctxT(t, 20*time.Second)
	ms := "3600000"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &ms}, "cfg"); err != nil {
		t.Fatal(err)
	}
	check := func(name, value string, src kmsg.ConfigSource) {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On("cfg", nil)
		if err != nil || c.Err != nil {
			t.Fatal(err, c.Err)
		}
		for _, cf := range c.Configs {
			if cf.Key == name {
				if cf.Value == nil || *cf.Value != value || cf.Source != src {
					t.Fatalf("%s = %v (source %v), want %q (%v)", name, cf.MaybeValue(), cf.Source, value, src)
				}
				return
			}
		}
		t.Fatalf("%s not described", name)
	}
	check("retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)
	check("retention.bytes", "5000000", kmsg.ConfigSourceStaticBrokerConfig)
	check("cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// Incremental: set, append to a list config, delete back to default.
	r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	if err != nil || r[0].Err != nil {
		t.Fatalf("alter: %v %v", err, r)
	}
	check("segment.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig)
	check("cleanup.policy", "delete,compact", kmsg.ConfigSourceDynamicTopicConfig)
	check("retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	// The new policy acts at once: keyless records are refused now.
	cl := b.client(kgo.DefaultProduceTopic("cfg"), kgo.RecordRetries(0))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("keyless record accepted after cleanup.policy became compact")
	}

	// Bad values and unknown names are INVALID_CONFIG, and change nothing.
	r, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "cfg")
	if len(r) != 1 || r[0].Err == nil {
		t.Fatalf("bad value accepted: %v", r)
	}
	r, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such", Value: kadm.StringPtr("1")}}, "cfg")
	if len(r) != 1 || r[0].Err == nil {
		t.Fatalf("unknown config accepted: %v", r)
	}

	// Non-incremental AlterConfigs replaces the whole set.
	sr, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("2000")}}, "cfg")
	if err != nil || sr[0].Err != nil {
		t.Fatalf("alter state: %v %v", err, sr)
	}
	check("max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig)
	check("segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig)

	// Everything survives a restart.
	b.restart()
	adm = b.admin()
	check("max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig)

	// Synonyms and documentation, as DescribeConfigs v1+/v3+ offer.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "cfg", []string{"retention.bytes"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	cf := resp.Resources[0].Configs[0]
	if len(cf.ConfigSynonyms) != 2 || cf.ConfigSynonyms[0].Name != "log.retention.bytes" || cf.Documentation == nil {
		t.Fatalf("synonyms %+v doc %v", cf.ConfigSynonyms, cf.Documentation)
	}
}

func TestCreatePartitions(t *testing.T) {
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	adm := b.admin()
	ctx := ctxT(t, 20*time.Second)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	r, err := adm.UpdatePartitions(ctx, 5, "grow")
	if err != nil || r.Error() != nil {
		t.Fatalf("grow: %v %v", err, r.Error())
	}
	if r, _ := adm.UpdatePartitions(ctx, 3, "grow"); r.Error() == nil {
		t.Fatal("shrinking accepted")
	}
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 5; p++ {
		produceAll(t, cl, []*kgo.Record{{Topic: "grow", Partition: p, Value: []byte{byte(p)}}})
	}
	b.restart()
	md, err := b.admin().Metadata(ctx, "grow")
	if err != nil || len(md.Topics["grow"].Partitions) != 5 {
		t.Fatalf("after restart: %v %v", err, md.Topics["grow"].Partitions)
	}
	if got := consumeN(t, b, "grow", 5); len(got) != 5 {
		t.Fatal(len(got))
	}
}
