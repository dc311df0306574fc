package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

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

// aclDescribeLogDirs: DESCRIBE on the cluster.
func aclDescribeLogDirs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeLogDirsRequest)
	if !c.authorizeCluster(auth.OpDescribe) {
		// Before v3 there is no error field: Kafka answers no dirs.
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = clusterDenied
		return resp, nil
	}
	return nil, nil
}
