package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

// handleDeleteRecords moves log start offsets up (kafka-delete-records).
func handleDeleteRecords(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			t := c.s.eng.Topic(rt.Topic)
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.LowWatermark = rp.Partition, -1
				p := partitionOf(t, rp.Partition)
				if p == nil {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if lw, err := p.DeleteRecords(ctx, rp.Offset); err != nil {
					sp.ErrorCode = errorCode(err)
				} else {
					sp.LowWatermark = lw
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

// handleOffsetForLeaderEpoch: korvet's leader epoch is always 0, so the
// end of epoch 0 is the high watermark and later epochs are unknown.
func handleOffsetForLeaderEpoch(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			t := c.s.eng.Topic(rt.Topic)
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
				p := partitionOf(t, rp.Partition)
				switch {
				case p == nil:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case rp.CurrentLeaderEpoch > 0:
					sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				case rp.LeaderEpoch == 0:
					sp.LeaderEpoch, sp.EndOffset = 0, p.HighWatermark()
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
}

func handleDescribeCluster(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ClusterID = c.s.eng.ClusterID()
		resp.ControllerID = c.s.opts.NodeID
		resp.EndpointType = req.EndpointType
		host, port := c.advertised()
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: c.s.opts.NodeID, Host: host, Port: port}}
		resp.ClusterAuthorizedOperations = -2147483648
		return resp
	}
}

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
					for _, pi := range p.Producers() {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ID, int32(pi.Epoch), pi.LastSequence
						ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, -1
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

// handleDescribeLogDirs reports one "log dir": korvet's keyspace in Redis,
// with each partition's bytes there.
func handleDescribeLogDirs(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = "redis:" + c.s.eng.Keyspace()
		dir.TotalBytes, dir.UsableBytes = -1, -1
		add := func(t *engine.Topic, parts []int32) {
			dt := kmsg.NewDescribeLogDirsResponseDirTopic()
			dt.Topic = t.Name()
			for _, id := range parts {
				if p := t.Partition(id); p != nil {
					dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
					dp.Partition, dp.Size = id, p.LocalBytes()
					dt.Partitions = append(dt.Partitions, dp)
				}
			}
			dir.Topics = append(dir.Topics, dt)
		}
		if req.Topics == nil {
			for _, t := range c.s.eng.Topics() {
				var ids []int32
				for _, p := range t.Partitions() {
					ids = append(ids, p.ID())
				}
				add(t, ids)
			}
		} else {
			for _, rt := range req.Topics {
				if t := c.s.eng.Topic(rt.Topic); t != nil {
					add(t, rt.Partitions)
				}
			}
		}
		resp.Dirs = append(resp.Dirs, dir)
		return resp
	}
}

// partitionOf is partition id of t, or nil when t is nil or has no such
// partition.
func partitionOf(t *engine.Topic, id int32) *engine.Partition {
	if t == nil {
		return nil
	}
	return t.Partition(id)
}
