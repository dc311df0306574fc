package kafkawire

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/korvet/korvet/engine/group"
)

// groupErrorCode maps a group coordinator error to a Kafka error code,
// falling back to errorCode for engine errors.
func groupErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, group.ErrInvalidGroupID):
		return kerr.InvalidGroupID.Code
	case errors.Is(err, group.ErrInvalidSessionTimeout):
		return kerr.InvalidSessionTimeout.Code
	case errors.Is(err, group.ErrInconsistentProtocol):
		return kerr.InconsistentGroupProtocol.Code
	case errors.Is(err, group.ErrUnknownMemberID):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, group.ErrMemberIDRequired):
		return kerr.MemberIDRequired.Code
	case errors.Is(err, group.ErrIllegalGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, group.ErrRebalanceInProgress):
		return kerr.RebalanceInProgress.Code
	case errors.Is(err, group.ErrFencedInstanceID):
		return kerr.FencedInstanceID.Code
	case errors.Is(err, group.ErrCoordinatorNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, group.ErrGroupNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, group.ErrNonEmptyGroup):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, group.ErrSubscribedToTopic):
		return kerr.GroupSubscribedToTopic.Code
	case errors.Is(err, group.ErrMetadataTooLarge):
		return kerr.OffsetMetadataTooLarge.Code
	case errors.Is(err, group.ErrFencedMemberEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, group.ErrStaleMemberEpoch):
		return kerr.StaleMemberEpoch.Code
	case errors.Is(err, group.ErrUnreleasedInstanceID):
		return kerr.UnreleasedInstanceID.Code
	case errors.Is(err, group.ErrUnsupportedAssignor):
		return kerr.UnsupportedAssignor.Code
	case errors.Is(err, group.ErrGroupMaxSize):
		return kerr.GroupMaxSizeReached.Code
	case errors.Is(err, group.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, group.ErrInvalidRegex):
		return kerr.InvalidRegularExpression.Code
	case errors.Is(err, group.ErrUnstableOffsetCommit):
		return kerr.UnstableOffsetCommit.Code
	default:
		return errorCode(err)
	}
}

// parkContext is ctx, also cancelled when the server stops accepting: a
// parked group call then answers NOT_COORDINATOR and the client looks for
// the coordinator again (finding the restarted korvet).
func (s *Server) parkContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// clientHost is what DescribeGroups shows as a member's host; Kafka
// prints the address with a leading slash.
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return "/" + c.nc.RemoteAddr().String()
	}
	return "/" + host
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
