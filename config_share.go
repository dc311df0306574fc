package main

import (
	"time"

	"github.com/BurntSushi/toml"
)

// checkShare validates the share group keys (Kafka's bounds where it has
// them).
func (c *Config) checkShare(bad func(k toml.Key, format string, args ...any) error) error {
	k := &c.Kafka
	switch {
	case k.ShareRecordLockDuration.Duration < time.Second || k.ShareRecordLockDuration.Duration > time.Hour:
		return bad(toml.Key{"kafka", "share_record_lock_duration"}, "must be 1s to 1h")
	case k.ShareDeliveryCountLimit < 2 || k.ShareDeliveryCountLimit > 10:
		return bad(toml.Key{"kafka", "share_delivery_count_limit"}, "must be 2 to 10")
	case k.ShareMaxPartitionLocks < 100 || k.ShareMaxPartitionLocks > 10000:
		return bad(toml.Key{"kafka", "share_max_partition_locks"}, "must be 100 to 10000")
	case k.ShareSessionTimeout.Duration < time.Second || k.ShareSessionTimeout.Duration > 30*time.Minute:
		return bad(toml.Key{"kafka", "share_session_timeout"}, "must be 1s to 30m")
	case k.ShareHeartbeatInterval.Duration < 100*time.Millisecond || k.ShareHeartbeatInterval.Duration >= k.ShareSessionTimeout.Duration:
		return bad(toml.Key{"kafka", "share_heartbeat_interval"}, "must be at least 100ms and below kafka.share_session_timeout")
	case k.ShareMaxGroupMembers < 1 || k.ShareMaxGroupMembers > 1000:
		return bad(toml.Key{"kafka", "share_max_group_members"}, "must be 1 to 1000")
	case k.ShareMaxSessions < 1 || k.ShareMaxSessions > 100000:
		return bad(toml.Key{"kafka", "share_max_sessions"}, "must be 1 to 100000")
	}
	return nil
}
