package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"
)

// RedisInfo is what the status page and /metrics show about Redis, read
// from INFO.
type RedisInfo struct {
	Version       string
	Mode          string // standalone, sentinel or cluster
	UptimeSeconds int64
	Clients       int64

	UsedMemory      int64
	UsedMemoryPeak  int64
	MaxMemory       int64  // 0: no limit
	MaxMemoryPolicy string // anything but noeviction can drop korvet's streams

	AOFEnabled          bool
	AOFLastWriteOK      bool
	RDBLastSaveUnix     int64
	RDBChangesSinceSave int64
	RDBLastBgsaveOK     bool

	// RoundTrip is how long the INFO call took, seen from korvet.
	RoundTrip time.Duration
	// Raw holds every field of the reply, for anything not parsed above.
	Raw map[string]string
}

// RedisInfo runs INFO on korvet's Redis.
func (e *Engine) RedisInfo(ctx context.Context) (RedisInfo, error) {
	start := time.Now()
	r, err := e.rc.Do(ctx, "INFO")
	if err != nil {
		return RedisInfo{}, fmt.Errorf("%w: INFO: %v", ErrStorageUnavailable, err)
	}
	info := parseRedisInfo(r.Bytes())
	info.RoundTrip = time.Since(start)
	return info, nil
}

// parseRedisInfo reads INFO's "field:value" lines; section headers and
// blank lines are skipped.
func parseRedisInfo(b []byte) RedisInfo {
	raw := make(map[string]string, 128)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok {
			raw[string(k)] = string(v)
		}
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(raw[k], 10, 64)
		return n
	}
	return RedisInfo{
		Version:             raw["redis_version"],
		Mode:                raw["redis_mode"],
		UptimeSeconds:       num("uptime_in_seconds"),
		Clients:             num("connected_clients"),
		UsedMemory:          num("used_memory"),
		UsedMemoryPeak:      num("used_memory_peak"),
		MaxMemory:           num("maxmemory"),
		MaxMemoryPolicy:     raw["maxmemory_policy"],
		AOFEnabled:          raw["aof_enabled"] == "1",
		AOFLastWriteOK:      raw["aof_last_write_status"] == "ok",
		RDBLastSaveUnix:     num("rdb_last_save_time"),
		RDBChangesSinceSave: num("rdb_changes_since_last_save"),
		RDBLastBgsaveOK:     raw["rdb_last_bgsave_status"] == "ok",
		Raw:                 raw,
	}
}
