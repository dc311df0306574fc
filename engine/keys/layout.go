package keys

// Key describes one kind of key Space builds.
type Key struct {
	// Pattern is the key in the standalone layout, with placeholders in
	// braces: {keyspace}, {topic}, {partition}, {segment}, {group},
	// {mechanism} and {node}.
	Pattern string
	// Cluster is the key in the Redis Cluster layout. Its hash tag shows
	// as braces around placeholders or as {meta} / {groups}:
	// "{{topic}:{partition}}" is the tag "{orders:3}".
	Cluster string
	Type    string // the Redis type: hash, stream, set or string
	Holds   string // what it holds, in short
}

// Layout lists every kind of key. A test in package main checks the
// README's storage table against it, both ways.
func Layout() []Key {
	return []Key{
		{"{keyspace}:storage:local:{topic}:{partition}:{segment}", "{keyspace}:storage:local:{{topic}:{partition}}:{segment}", "stream", "one segment's records, ID <offset>-<1+codec>"},
		{"{keyspace}:meta:topics", "{keyspace}:{meta}:topics", "hash", "topic name -> JSON metadata"},
		{"{keyspace}:meta:partition:{topic}:{partition}", "{keyspace}:meta:partition:{{topic}:{partition}}", "hash", "a partition's counters and producer states"},
		{"{keyspace}:meta:segments:{topic}:{partition}", "{keyspace}:meta:segments:{{topic}:{partition}}", "hash", "segment id -> JSON segment"},
		{"{keyspace}:meta:batches:{topic}:{partition}", "{keyspace}:meta:batches:{{topic}:{partition}}", "stream", "one entry per append: max timestamp, byte total"},
		{"{keyspace}:meta:aborted:{topic}:{partition}", "{keyspace}:meta:aborted:{{topic}:{partition}}", "stream", "one entry per aborted transaction: ID <marker offset>-1, pid, first offset"},
		{"{keyspace}:meta:fence:{topic}:{partition}", "{keyspace}:meta:fence:{{topic}:{partition}}", "string", "append rounds refused by the fence check (written only then)"},
		{"{keyspace}:meta:transactions", "{keyspace}:{txns}:transactions", "hash", "transactional id -> JSON transaction state"},
		{"{keyspace}:meta:cluster", "{keyspace}:{meta}:cluster", "hash", "cluster id, producer id counter, SCRAM decoy seed"},
		{"{keyspace}:meta:scram:{mechanism}", "{keyspace}:{meta}:scram:{mechanism}", "hash", "user name -> JSON SCRAM credential"},
		{"{keyspace}:meta:acls", "{keyspace}:{meta}:acls", "set", "JSON ACLs"},
		{"{keyspace}:meta:groups", "{keyspace}:{groups}:groups", "hash", "group name -> protocol type"},
		{"{keyspace}:group:{group}:state", "{keyspace}:{groups}:group:{group}:state", "string", "a group's membership as JSON"},
		{"{keyspace}:group:{group}:consumer", "{keyspace}:{groups}:group:{group}:consumer", "string", "a consumer group's epochs, members and assignments as JSON"},
		{"{keyspace}:group:{group}:offsets", "{keyspace}:{groups}:group:{group}:offsets", "hash", "topic:partition -> committed offset"},
		{"{keyspace}:group:{group}:txnoffsets", "{keyspace}:{groups}:group:{group}:txnoffsets", "hash", "pid:topic:partition -> offset committed in an open transaction"},
		{"{keyspace}:meta:zdict:{topic}", "{keyspace}:{meta}:zdict:{topic}", "hash", "a topic's zstd dictionaries: version -> bytes, current"},
		{"{keyspace}:meta:coldgc", "{keyspace}:{meta}:coldgc", "set", "cold files and tables to delete"},
		{"{keyspace}:meta:events", "{keyspace}:{meta}:events", "stream", "changes to shared state, for every broker"},
		{"{keyspace}:meta:brokers", "{keyspace}:{meta}:brokers", "hash", "node id -> JSON broker registration"},
		{"{keyspace}:meta:broker:{node}", "{keyspace}:{meta}:broker:{node}", "string", "a broker's lease: its instance token"},
		{"{keyspace}:meta:sharegroups", "{keyspace}:{meta}:sharegroups", "hash", "share group name -> creation time"},
		{"{keyspace}:meta:groupconfigs", "{keyspace}:{meta}:groupconfigs", "hash", "group name -> JSON group configs"},
		{"{keyspace}:share:{group}:{topic}:{partition}", "{keyspace}:share:{{topic}:{partition}}:state:{group}", "hash", "a share-partition's cursor segment and counters"},
		{"{keyspace}:share:{group}:partitions", "{keyspace}:{groups}:share:{group}:partitions", "set", "topic:partition of a share group's state"},
		{"{keyspace}:share:{group}:{topic}:{partition}:cold", "{keyspace}:share:{{topic}:{partition}}:cold:{group}", "hash", "share delivery state of cold records"},
		{"{keyspace}:meta:schemas", "{keyspace}:{schemas}:schemas", "hash", "schema id -> JSON schema source"},
		{"{keyspace}:meta:schemaids", "{keyspace}:{schemas}:schemaids", "hash", "schema fingerprint -> id; next: the last id"},
		{"{keyspace}:meta:subjects", "{keyspace}:{schemas}:subjects", "hash", "subject -> JSON versions (version, id, deleted)"},
		{"{keyspace}:meta:schemaconfig", "{keyspace}:{schemas}:schemaconfig", "hash", "compatibility levels and modes, global and per subject"},
	}
}
