package kafkawire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzParseRequest feeds arbitrary request bodies to the header and body
// decoder: it must return an error or a request, never panic, and never
// allocate beyond what the input can justify (kmsg bounds array lengths by
// the bytes left).
func FuzzParseRequest(f *testing.F) {
	var fm kmsg.RequestFormatter
	seed := func(r kmsg.Request) {
		b := fm.AppendRequest(nil, r, 1)
		f.Add(b[4:]) // without the size prefix, as the reader hands it over
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	seed(md)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	seed(av)
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 9
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2}
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	seed(pr)
	fr := kmsg.NewPtrFetchRequest()
	fr.Version = 13
	seed(fr)
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 5, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, req, err := parseRequest(b)
		if err == nil && req != nil && (req.Key() != h.key || req.GetVersion() != h.version) {
			t.Fatalf("decoded %d v%d from a header saying %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
	})
}
