package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

func handleDescribeProducers(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeProducersRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			t := c.s.eng.Topic(rt.Topic)
			for _, id := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition = id
				p := partitionOf(t, id)
				if p == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else {
					open := map[int64]int64{}
					for _, o := range p.OpenTxns() {
						open[o.ProducerID] = o.FirstOffset
					}
					for _, pi := range p.Producers() {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ID, int32(pi.Epoch), pi.LastSequence
						ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, -1
						if first, ok := open[pi.ID]; ok {
							ap.CurrentTxnStartOffset = first
						}
						sp.ActiveProducers = append(sp.ActiveProducers, ap)
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// aclDescribeProducers: READ on each topic.
func aclDescribeProducers(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeProducersRequest)
	var out []refused[kmsg.DescribeProducersRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.DescribeProducersRequestTopic) int16 { return c.topicCode(auth.OpRead, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeProducersResponse)
		for _, o := range out {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
