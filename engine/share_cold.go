package engine

import (
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/share"
)

type coldAcq struct {
	off   int64
	count int16
	idx   int
}

// shareAcquireCold acquires records of an archived segment whose stream is
// gone.
func (e *Engine) shareAcquireCold(ctx context.Context, group, member string, p *Partition, sg Segment, set shareSettings, n int, out *ShareRecords) ([]coldAcq, error) {
	return nil, nil
}

func (e *Engine) shareAckCold(ctx context.Context, group, member string, p *Partition, runs []share.AckRun, set shareSettings) error {
	return fmt.Errorf("%w: cold records", share.ErrInvalidRecordState)
}

func (e *Engine) shareReleaseCold(ctx context.Context, group, member string, p *Partition, set shareSettings) error {
	return nil
}

// shareColdState returns the records in flight in cold segments and the
// start offset there (-1 when no cold record is pending).
func (e *Engine) shareColdState(ctx context.Context, group string, p *Partition, seg int64) (inflight, start int64, err error) {
	return 0, -1, nil
}
