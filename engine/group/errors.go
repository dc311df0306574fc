package group

import "errors"

// Errors the coordinator returns. Each stands for one Kafka error code;
// the wire layer maps them.
var (
	ErrInvalidGroupID          = errors.New("invalid group id")
	ErrInvalidSessionTimeout   = errors.New("session timeout outside the broker's allowed range")
	ErrInconsistentProtocol    = errors.New("group protocol type or protocols do not match the group's")
	ErrUnknownMemberID         = errors.New("unknown member id")
	ErrMemberIDRequired        = errors.New("member id required: rejoin with the given member id")
	ErrIllegalGeneration       = errors.New("illegal generation")
	ErrRebalanceInProgress     = errors.New("rebalance in progress")
	ErrFencedInstanceID        = errors.New("static member fenced by a newer member with the same instance id")
	ErrCoordinatorNotAvailable = errors.New("group coordinator not available")
	ErrNotCoordinator          = errors.New("not the group coordinator")
	ErrGroupNotFound           = errors.New("group not found")
	ErrNonEmptyGroup           = errors.New("group is not empty")
	ErrSubscribedToTopic       = errors.New("group is subscribed to the topic")
	ErrMetadataTooLarge        = errors.New("offset metadata too large")
)

// Errors of the consumer group protocol (KIP-848).
var (
	ErrFencedMemberEpoch    = errors.New("member epoch fenced: abandon partitions and rejoin")
	ErrStaleMemberEpoch     = errors.New("stale member epoch")
	ErrUnreleasedInstanceID = errors.New("instance id still used by another member")
	ErrUnsupportedAssignor  = errors.New("unsupported server assignor")
	ErrGroupMaxSize         = errors.New("group has reached its maximum size")
	ErrInvalidRequest       = errors.New("invalid request")
	ErrInvalidRegex         = errors.New("invalid regular expression")
)

// Errors of offsets committed inside transactions (KIP-447).
var (
	// ErrUnstableOffsetCommit: OffsetFetch asked for stable offsets
	// (RequireStable) and a transaction holds an offset for the partition
	// that it has not committed or aborted yet.
	ErrUnstableOffsetCommit = errors.New("the partition has an offset pending in an open transaction")
)
