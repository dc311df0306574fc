package resp

import (
	"context"
	"errors"
)

// cluster routes commands over the masters of a Redis Cluster.
// (Being built: see the Redis Cluster issue.)
type cluster struct{}

var errClusterTODO = errors.New("resp: Redis Cluster support is being built")

func (cl *cluster) stats() Stats                              { return Stats{} }
func (cl *cluster) masters(context.Context) ([]string, error) { return nil, errClusterTODO }
func (cl *cluster) doNode(context.Context, string, ...any) (Reply, error) {
	return Reply{}, errClusterTODO
}
func (cl *cluster) shards(context.Context) ([]Shard, error) { return nil, errClusterTODO }
