package engine

import (
	"context"
	"errors"
	"fmt"
)

// offsetsTopic is Kafka's internal topic of group offsets. korvet keeps
// group offsets in Redis hashes instead, but tools and clients expect the
// topic to exist (listed as internal), so korvet creates it, empty, and
// refuses writes to it and its deletion.
const offsetsTopic = "__consumer_offsets"

// Internal reports whether the topic is one of Kafka's internal topics.
func (t *Topic) Internal() bool { return t.name == offsetsTopic }

func (e *Engine) ensureInternalTopics(ctx context.Context) error {
	if e.Topic(offsetsTopic) != nil {
		return nil
	}
	_, err := e.CreateTopic(ctx, offsetsTopic, 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil && !errors.Is(err, ErrTopicExists) {
		return fmt.Errorf("create %s: %w", offsetsTopic, err)
	}
	return nil
}

// UserTopics returns the topics clients made, without internal ones,
// sorted by name: what a status page lists.
func (e *Engine) UserTopics() []*Topic {
	all := e.Topics()
	out := all[:0:0]
	for _, t := range all {
		if !t.Internal() {
			out = append(out, t)
		}
	}
	return out
}
