package share

import "fmt"

// TopicPartition names a partition by topic id, as share sessions do.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// MaxSessionPartitions bounds the partitions of one share session, which
// a client grows with each incremental request.
const MaxSessionPartitions = 10000

// SessionKey identifies a share session: one per member and broker.
type SessionKey struct {
	Group, Member string
}

// Session is a share session: the partitions a member fetches from and
// the epoch its next request must carry.
type Session struct {
	Epoch int32
	Parts map[TopicPartition]struct{}
}

// partList copies a session's partitions, for use outside the lock.
func (s *Session) partList() []TopicPartition {
	out := make([]TopicPartition, 0, len(s.Parts))
	for tp := range s.Parts {
		out = append(out, tp)
	}
	return out
}

// OpenSession starts a session (ShareSessionEpoch 0), replacing the
// member's previous one. It returns the partitions of the new session.
func (c *Coordinator) OpenSession(k SessionKey, parts []TopicPartition) ([]TopicPartition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, k)
	if len(parts) > MaxSessionPartitions {
		return nil, fmt.Errorf("%w: more than %d partitions in a share session", ErrInvalidRequest, MaxSessionPartitions)
	}
	if len(c.sessions) >= c.opts.MaxSessions {
		return nil, ErrSessionLimit
	}
	s := &Session{Epoch: 1, Parts: make(map[TopicPartition]struct{}, len(parts))}
	for _, tp := range parts {
		s.Parts[tp] = struct{}{}
	}
	c.sessions[k] = s
	return s.partList(), nil
}

// UpdateSession checks an incremental request's epoch, adds and forgets
// partitions, moves the epoch on, and returns the session's partitions.
func (c *Coordinator) UpdateSession(k SessionKey, epoch int32, add, forget []TopicPartition) ([]TopicPartition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[k]
	if s == nil {
		return nil, ErrSessionNotFound
	}
	if epoch != s.Epoch {
		return nil, ErrInvalidSessionEpoch
	}
	grow := 0
	for _, tp := range add {
		if _, ok := s.Parts[tp]; !ok {
			grow++
		}
	}
	if len(s.Parts)+grow > MaxSessionPartitions+len(forget) {
		return nil, fmt.Errorf("%w: more than %d partitions in a share session", ErrInvalidRequest, MaxSessionPartitions)
	}
	for _, tp := range forget {
		delete(s.Parts, tp)
	}
	for _, tp := range add {
		s.Parts[tp] = struct{}{}
	}
	s.Epoch++
	if s.Epoch < 0 { // wrapped: Kafka goes back to 1
		s.Epoch = 1
	}
	return s.partList(), nil
}

// CheckSession checks a ShareAcknowledge's epoch against the session and
// moves it on (epoch -1 closes the session and returns its partitions).
func (c *Coordinator) CheckSession(k SessionKey, epoch int32) ([]TopicPartition, error) {
	if epoch == 0 {
		return nil, ErrInvalidSessionEpoch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[k]
	if s == nil {
		return nil, ErrSessionNotFound
	}
	parts := s.partList()
	if epoch == -1 {
		delete(c.sessions, k)
		return parts, nil
	}
	if epoch != s.Epoch {
		return nil, ErrInvalidSessionEpoch
	}
	s.Epoch++
	if s.Epoch < 0 {
		s.Epoch = 1
	}
	return parts, nil
}

// CloseSession ends a session (ShareSessionEpoch -1) and returns its
// partitions.
func (c *Coordinator) CloseSession(k SessionKey) ([]TopicPartition, error) {
	return c.CheckSession(k, -1)
}

// Sessions is the number of open share sessions.
func (c *Coordinator) Sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

func (c *Coordinator) dropSessionsLocked(group, member string) {
	delete(c.sessions, SessionKey{group, member})
}
