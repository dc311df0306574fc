package engine

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// ConfigOp is one change of IncrementalAlterConfigs.
type ConfigOp struct {
	Name  string
	Op    int8 // 0 set, 1 delete (back to default), 2 append, 3 subtract (list configs)
	Value string
}

// Config op codes, as Kafka numbers them.
const (
	OpSet int8 = iota
	OpDelete
	OpAppend
	OpSubtract
)

// listConfigs are the configs whose values are comma-separated lists.
var listConfigs = map[string]bool{"cleanup.policy": true}

// AlterConfigs replaces a topic's configs with set (Kafka's AlterConfigs:
// what is not named goes back to its default).
func (e *Engine) AlterConfigs(ctx context.Context, topic string, set map[string]string, validateOnly bool) error {
	return e.changeConfigs(ctx, topic, validateOnly, func(map[string]string) (map[string]string, error) {
		return maps.Clone(set), nil
	})
}

// IncrementalAlterConfigs applies ops to a topic's configs.
func (e *Engine) IncrementalAlterConfigs(ctx context.Context, topic string, ops []ConfigOp, validateOnly bool) error {
	return e.changeConfigs(ctx, topic, validateOnly, func(cur map[string]string) (map[string]string, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
		for _, op := range ops {
			if _, ok := LookupConfig(op.Name); !ok {
				return nil, fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, op.Name)
			}
			switch op.Op {
			case OpSet:
				next[op.Name] = op.Value
			case OpDelete:
				delete(next, op.Name)
			case OpAppend, OpSubtract:
				if !listConfigs[op.Name] {
					return nil, fmt.Errorf("%w: %s is not a list config; APPEND and SUBTRACT need one", ErrInvalidConfig, op.Name)
				}
				v, ok := next[op.Name]
				if !ok {
					d, _ := LookupConfig(op.Name)
					v = d.Default
				}
				items := splitList(v)
				for _, x := range splitList(op.Value) {
					i := slices.Index(items, x)
					if op.Op == OpAppend && i < 0 {
						items = append(items, x)
					} else if op.Op == OpSubtract && i >= 0 {
						items = slices.Delete(items, i, i+1)
					}
				}
				next[op.Name] = strings.Join(items, ",")
			default:
				return nil, fmt.Errorf("%w: unknown operation %d on %s", ErrInvalidConfig, op.Op, op.Name)
			}
		}
		return next, nil
	})
}

func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func (e *Engine) changeConfigs(ctx context.Context, topic string, validateOnly bool, change func(map[string]string) (map[string]string, error)) error {
	e.createMu.Lock()
	defer e.createMu.Unlock()
	// Start from Redis: another broker may have changed the topic.
	if err := e.reloadTopicLocked(ctx, topic); err != nil {
		return err
	}
	t := e.Topic(topic)
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	next, err := change(t.Configs())
	if err != nil {
		return err
	}
	if err := ValidateConfigs(next); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if validateOnly {
		return nil
	}
	m := t.meta()
	m.Configs = next
	if err := e.saveMeta(ctx, t.name, m, "configs"); err != nil {
		return err
	}
	t.setConfigs(next)
	e.topicsChanged()
	e.log.Info("topic configs changed", "topic", topic, "configs", next)
	return nil
}

// CreatePartitions grows a topic to count partitions.
func (e *Engine) CreatePartitions(ctx context.Context, topic string, count int32, validateOnly bool) error {
	e.createMu.Lock()
	defer e.createMu.Unlock()
	if err := e.reloadTopicLocked(ctx, topic); err != nil {
		return err
	}
	t := e.Topic(topic)
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	have := int32(len(t.Partitions()))
	if count <= have {
		return fmt.Errorf("%w: topic %s has %d partitions; the new count must be larger", ErrInvalidPartitions, topic, have)
	}
	if err := e.checkPartitionCaps(topic, count, count-have); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	m := t.meta()
	m.Partitions = count
	if err := e.saveMeta(ctx, t.name, m, "partitions"); err != nil {
		return err
	}
	if err := e.growTopic(ctx, t, have, count); err != nil {
		return err
	}
	if err := e.assignNew(ctx, t.Partitions()[have:]); err != nil {
		e.log.Warn("partitions created; they get a leader at the next check", "topic", topic, "err", err)
	}
	e.log.Info("partitions created", "topic", topic, "from", have, "to", count)
	e.partitionsChanged()
	e.topicsChanged()
	return nil
}

func (t *Topic) meta() topicMeta {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return topicMeta{ID: hex.EncodeToString(t.id[:]), Partitions: int32(len(t.parts)), Configs: maps.Clone(t.configs), Created: t.created}
}

// saveMeta stores a topic's metadata and, in the same round trip,
// announces the change (partitions, configs) to the other brokers.
func (e *Engine) saveMeta(ctx context.Context, name string, m topicMeta, change string) error {
	js, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("save topic %q: %w", name, err)
	}
	var pl resp.Pipeline
	pl.Cmd("HSET", e.k.Topics(), name, js)
	e.events.Append(&pl, events.Topic, "topic", name, "change", change)
	rs, err := e.rc.Exec(ctx, &pl)
	if err != nil {
		return fmt.Errorf("%w: save topic %q: %v", ErrStorageUnavailable, name, err)
	}
	defer rs.Release()
	if err := rs.At(0).Err(); err != nil {
		return fmt.Errorf("%w: save topic %q: %v", ErrStorageUnavailable, name, err)
	}
	if err := rs.At(1).Err(); err != nil {
		e.log.Warn("topic changed but other brokers were not told; they see it on their next resync", "topic", name, "err", err)
	}
	return nil
}
