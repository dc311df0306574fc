package engine

// partitionsChanged is called after partitions were added to this
// broker's view (a topic created or grown, here or on another broker) so
// that leadership can be settled for them. Engineer A's leadership code
// gives it a body; until then a single broker leads everything anyway.
func (e *Engine) partitionsChanged() {}
