package engine

import "testing"

// Slot ranges are written compactly, a single slot without a dash, and a
// slot is found in whichever shard's ranges hold it.
func TestRedisShardSlots(t *testing.T) {
	shards := []RedisShard{
		{Master: "a", Ranges: [][2]int{{0, 5460}, {10923, 10923}}},
		{Master: "b", Ranges: [][2]int{{5461, 10922}}},
		{Master: "c", Ranges: [][2]int{{10924, 16383}}},
	}
	if got := shards[0].SlotRanges(); got != "0-5460,10923" {
		t.Errorf("SlotRanges = %q", got)
	}
	if got := (RedisShard{}).SlotRanges(); got != "" {
		t.Errorf("no slots: %q", got)
	}
	for slot, want := range map[int]int{0: 0, 5460: 0, 5461: 1, 10922: 1, 10923: 0, 10924: 2, 16383: 2} {
		if got := shardOfSlot(shards, slot); got != want {
			t.Errorf("shardOfSlot(%d) = %d, want %d", slot, got, want)
		}
	}
	if got := shardOfSlot(shards[1:], 10923); got != -1 {
		t.Errorf("an unserved slot: %d, want -1", got)
	}
}
