package kafkawire

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/group"
	"github.com/korvet/korvet/engine/share"
)

// Share groups (KIP-932): share_heartbeat.go, share_describe.go,
// share_fetch.go, share_acknowledge.go and share_offsets.go. Membership
// and share sessions are in engine/share; delivery state is in Redis
// consumer groups (engine/share.go).

// maxShareAckOffsets bounds the offsets one partition's acknowledgement
// batches may cover in one request: checked before anything is allocated
// per offset.
const maxShareAckOffsets = 50000

// maxShareRecords bounds the records one ShareFetch acquires (MaxRecords
// above it is lowered; 0 means Kafka's default, 500).
const maxShareRecords = 10000

// shareLockMillis is group's acquisition lock duration in ms, which
// ShareFetch and ShareAcknowledge v2 report: its group config, else the
// broker's.
func shareLockMillis(ctx context.Context, eng *engine.Engine, group string) int32 {
	if lock, err := eng.ShareLockDuration(ctx, group); err == nil {
		return int32(lock.Milliseconds())
	}
	return int32(eng.ShareOptions().LockDuration.Milliseconds())
}

// shareIDsError checks the group and member ids of a ShareFetch or
// ShareAcknowledge: both are needed (a member id is a UUID string), and a
// classic or consumer group's id is no share group's, as in Kafka. 0 when
// they are fine.
func shareIDsError(eng *engine.Engine, group, member string) int16 {
	switch {
	case group == "" || member == "" || len(member) > 36:
		return kerr.InvalidRequest.Code
	case eng.Groups().Exists(group):
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

// shareErrorCode maps share group errors to Kafka codes.
func shareErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, share.ErrInvalidRequest), errors.Is(err, share.ErrInvalidAcknowledgeTy), errors.Is(err, share.ErrTooManyAcknowledged):
		return kerr.InvalidRequest.Code
	case errors.Is(err, share.ErrUnknownMember):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, share.ErrFencedEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, share.ErrGroupFull):
		return kerr.GroupMaxSizeReached.Code
	case errors.Is(err, share.ErrSessionNotFound):
		return kerr.ShareSessionNotFound.Code
	case errors.Is(err, share.ErrInvalidSessionEpoch):
		return kerr.InvalidShareSessionEpoch.Code
	case errors.Is(err, share.ErrSessionLimit):
		return 133 // SHARE_SESSION_LIMIT_REACHED
	case errors.Is(err, share.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, share.ErrGroupNotEmpty):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, share.ErrGroupNotFound), errors.Is(err, engine.ErrGroupExists):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	}
	// The coordinator's errors (NOT_COORDINATOR, ...) and the engine's.
	return groupErrorCode(err)
}

func toAckBatches[B any](in []B, get func(*B) (int64, int64, []int8)) []share.AckBatch {
	out := make([]share.AckBatch, 0, len(in))
	for i := range in {
		f, l, t := get(&in[i])
		out = append(out, share.AckBatch{First: f, Last: l, Types: t})
	}
	return out
}

// configOps turns IncrementalAlterConfigs entries into engine ops.
func configOps(cfs []kmsg.IncrementalAlterConfigsRequestResourceConfig) []engine.ConfigOp {
	ops := make([]engine.ConfigOp, 0, len(cfs))
	for _, cf := range cfs {
		op := engine.ConfigOp{Name: cf.Name, Op: int8(cf.Op)}
		if cf.Value != nil {
			op.Value = *cf.Value
		}
		ops = append(ops, op)
	}
	return ops
}

// groupConfigs describes a group's configs (GROUP resources): the share
// group configs, set or default.
func (c *conn) groupConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest, group string, want func(string) bool) ([]kmsg.DescribeConfigsResponseResourceConfig, int16, *string) {
	set, err := c.s.eng.GroupConfigs(ctx, group)
	if err != nil {
		return nil, errorCode(err), errMsg(err)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range c.s.eng.GroupConfigDefs() {
		if !want(d.Name) {
			continue
		}
		cf := kmsg.NewDescribeConfigsResponseResourceConfig()
		v, ok := set[d.Name]
		cf.Source = kmsg.ConfigSourceGroupConfig
		if !ok {
			v = d.Default
			cf.Source = kmsg.ConfigSourceDefaultConfig
			cf.IsDefault = true
		}
		cf.Name, cf.Value = d.Name, &v
		cf.ConfigType = kmsg.ConfigTypeInt
		if d.Name == engine.CfgShareAutoOffsetReset {
			cf.ConfigType = kmsg.ConfigTypeString
		}
		if req.IncludeDocumentation {
			doc := d.Doc
			cf.Documentation = &doc
		}
		out = append(out, cf)
	}
	return out, 0, nil
}
