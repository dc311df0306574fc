package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"sync"
)

// Topic is a named set of partitions with its configs.
type Topic struct {
	e       *Engine
	name    string
	id      [16]byte
	created int64

	mu       sync.RWMutex
	configs  map[string]string // explicitly set on the topic
	settings topicSettings
	parts    []*Partition

	z topicZstd // compression at rest (zstd.go)
}

func (e *Engine) newTopic(name string, m topicMeta) (*Topic, error) {
	var id [16]byte
	raw, err := hex.DecodeString(m.ID)
	if err != nil || len(raw) != 16 {
		return nil, fmt.Errorf("bad topic id %q", m.ID)
	}
	copy(id[:], raw)
	t := &Topic{e: e, name: name, id: id, created: m.Created, configs: m.Configs}
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	t.settings = parseSettings(t.ConfigValue)
	t.initZstd()
	t.parts = make([]*Partition, m.Partitions)
	for i := range t.parts {
		t.parts[i] = newPartition(t, int32(i))
	}
	return t, nil
}

// Name is the topic's name.
func (t *Topic) Name() string { return t.name }

// ID is the topic's UUID.
func (t *Topic) ID() [16]byte { return t.id }

// Partitions returns the topic's partitions in order.
func (t *Topic) Partitions() []*Partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.parts
}

// Partition returns partition i, or nil.
func (t *Topic) Partition(i int32) *Partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if i < 0 || int(i) >= len(t.parts) {
		return nil
	}
	return t.parts[i]
}

// ConfigSource says where a config value comes from.
type ConfigSource int

// Sources, in Kafka's order of precedence (lowest first).
const (
	SourceDefault ConfigSource = iota
	SourceStaticBroker
	SourceTopic
)

// Config returns a config's effective value and its source.
func (t *Topic) Config(name string) (string, ConfigSource) {
	t.mu.RLock()
	v, ok := t.configs[name]
	t.mu.RUnlock()
	if ok {
		return v, SourceTopic
	}
	if v, ok := t.e.opts.TopicDefaults[name]; ok {
		return v, SourceStaticBroker
	}
	if d, ok := LookupConfig(name); ok {
		return d.Default, SourceDefault
	}
	return "", SourceDefault
}

// ConfigValue returns a config's effective value.
func (t *Topic) ConfigValue(name string) string {
	v, _ := t.Config(name)
	return v
}

// Configs returns the configs set explicitly on the topic.
func (t *Topic) Configs() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.configs)
}

// MaxMessageBytes is the largest record batch the topic accepts.
func (t *Topic) MaxMessageBytes() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings.maxMessageBytes
}

// Compacted reports whether cleanup.policy includes compact.
func (t *Topic) Compacted() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings.compact
}

func (t *Topic) currentSettings() topicSettings {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings
}

// loadPartitions loads the state of partitions from index from on.
func (t *Topic) loadPartitions(ctx context.Context, from int) error {
	return loadPartitions(ctx, t.e, t.Partitions()[from:])
}
