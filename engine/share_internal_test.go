package engine

import (
	"errors"
	"testing"
	"time"
)

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P1D": 24 * time.Hour, "PT1M30S": 90 * time.Second, "P1DT2H": 26 * time.Hour, "PT0.5S": 500 * time.Millisecond, "P2W": 14 * 24 * time.Hour,
	} {
		if got, err := parseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "1H", "PT", "PTH", "PT1X", "P1H", "PT1", "PT-1S"} {
		if _, err := parseISODuration(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestValidateGroupConfig(t *testing.T) {
	for _, ok := range [][2]string{{CfgShareAutoOffsetReset, "latest"}, {CfgShareAutoOffsetReset, "earliest"}, {CfgShareAutoOffsetReset, "by_duration:PT10M"},
		{CfgShareLockDuration, "15000"}, {CfgShareDeliveryLimit, "3"}} {
		if err := ValidateGroupConfig(ok[0], ok[1]); err != nil {
			t.Errorf("%s=%s: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{CfgShareAutoOffsetReset, "sometimes"}, {CfgShareAutoOffsetReset, "by_duration:10m"}, {CfgShareLockDuration, "10"},
		{CfgShareLockDuration, "x"}, {CfgShareDeliveryLimit, "1"}, {CfgShareDeliveryLimit, "11"}, {"consumer.session.timeout.ms", "45000"}} {
		if err := ValidateGroupConfig(bad[0], bad[1]); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%s: %v, want ErrInvalidConfig", bad[0], bad[1], err)
		}
	}
}
