package kafkawire

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
)

// Config helpers the config APIs share.

// configSource maps an engine config source to Kafka's DescribeConfigs
// source codes.
func configSource(s engine.ConfigSource) int8 {
	switch s {
	case engine.SourceTopic:
		return 1 // DYNAMIC_TOPIC_CONFIG
	case engine.SourceStaticBroker:
		return 4 // STATIC_BROKER_CONFIG
	default:
		return 5 // DEFAULT_CONFIG
	}
}

// alterTopicOnly runs alter for topic resources; broker configs come from
// korvet.toml and cannot be altered over the wire.
func alterTopicOnly(rt kmsg.ConfigResourceType, alter func() error) error {
	if rt != kmsg.ConfigResourceTypeTopic {
		return fmt.Errorf("%w: only topic configs can be altered; broker defaults come from korvet.toml", engine.ErrInvalidConfig)
	}
	return alter()
}
