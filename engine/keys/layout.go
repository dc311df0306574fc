package keys

// Key describes one kind of key Space builds.
type Key struct {
	// Pattern is the key with placeholders in braces: {keyspace}, {topic},
	// {partition}, {segment}, {group}, {mechanism} and {node}.
	Pattern string
	Type    string // the Redis type: hash, stream, set or string
	Holds   string // what it holds, in short
}

// Layout lists every kind of key. A test in package main checks the
// README's storage table against it, both ways.
func Layout() []Key {
	return []Key{
		{"{keyspace}:storage:local:{topic}:{partition}:{segment}", "stream", "one segment's records, ID <offset>-<1+codec>"},
		{"{keyspace}:meta:topics", "hash", "topic name -> JSON metadata"},
		{"{keyspace}:meta:partition:{topic}:{partition}", "hash", "a partition's counters and producer states"},
		{"{keyspace}:meta:segments:{topic}:{partition}", "hash", "segment id -> JSON segment"},
		{"{keyspace}:meta:batches:{topic}:{partition}", "stream", "one entry per append: max timestamp, byte total"},
		{"{keyspace}:meta:cluster", "hash", "cluster id, producer id counter, SCRAM decoy seed"},
		{"{keyspace}:meta:scram:{mechanism}", "hash", "user name -> JSON SCRAM credential"},
		{"{keyspace}:meta:acls", "set", "JSON ACLs"},
		{"{keyspace}:meta:groups", "hash", "group name -> protocol type"},
		{"{keyspace}:group:{group}:state", "string", "a group's membership as JSON"},
		{"{keyspace}:group:{group}:consumer", "string", "a consumer group's epochs, members and assignments as JSON"},
		{"{keyspace}:group:{group}:offsets", "hash", "topic:partition -> committed offset"},
		{"{keyspace}:meta:coldgc", "set", "cold files and tables to delete"},
		{"{keyspace}:meta:events", "stream", "changes to shared state, for every broker"},
		{"{keyspace}:meta:brokers", "hash", "node id -> JSON broker registration"},
		{"{keyspace}:meta:broker:{node}", "string", "a broker's lease: its instance token"},
		{"{keyspace}:meta:sharegroups", "hash", "share group name -> creation time"},
		{"{keyspace}:meta:groupconfigs", "hash", "group name -> JSON group configs"},
		{"{keyspace}:share:{group}:{topic}:{partition}", "hash", "a share-partition's cursor segment and counters"},
		{"{keyspace}:share:{group}:partitions", "set", "topic:partition of a share group's state"},
		{"{keyspace}:share:{group}:{topic}:{partition}:cold", "hash", "share delivery state of cold records"},
	}
}
