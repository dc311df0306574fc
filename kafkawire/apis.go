package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler does the part of a request that must happen in request order
// (such as queueing a produce) and returns the rest, which runs
// concurrently; its response is written in request order.
type handler func(ctx context.Context, c *conn, req kmsg.Request) func() kmsg.Response

// apiDef is one API korvet serves: the versions that work, its handler and
// its authorization rule (see authorize.go). Both live in the API's file.
type apiDef struct {
	min, max int16
	handle   handler
	rule     aclRule
}

// apiTable lists every API korvet answers, with the versions that work, its
// handler and its authorization rule. It is what ApiVersions advertises, so
// nothing may be listed that is not served, with one exception: Produce
// v0-2.
//
// Why the minimums are what they are: librdkafka (kcat, confluent-kafka)
// reads a broker's ranges against the versions its feature table
// (rdkafka_feature.c) needs, and before 2.11.1 (2.0.2 measured) it
// compresses with gzip, snappy or lz4 only if Produce is listed somewhere
// in 0..0 (zstd: 0..7).
// A Produce minimum above 0 made it send those batches uncompressed,
// silently. So, as Kafka 4.0 does (KAFKA-18659), Produce is advertised from
// 0 while v0-2 (pre-0.11 message sets) are answered UNSUPPORTED_VERSION
// (refuseOldProduce). Fetch starts at 4, as in Kafka 4.0: librdkafka needs
// Fetch 4 for MsgVer2 and 10 for ZSTD; the features that need Fetch 1-2
// (MsgVer1, ThrottleTime) are its fallbacks for brokers without MsgVer2,
// and it fetches at the highest version both sides have. Every other API
// starts at 0, so no feature's range can miss it, but the share group
// APIs, which start where Kafka 4.2 does and which librdkafka's feature
// table does not use.
//
// TestApiVersionsAnswer holds the list as it is advertised: change both.
func apiTable() map[kmsg.Key]apiDef {
	return map[kmsg.Key]apiDef{
		kmsg.Produce:                 {0, 13, handleProduce, aclProduce}, // v0-2 refused, see above
		kmsg.Fetch:                   {4, 18, handleFetch, aclFetch},
		kmsg.ListOffsets:             {0, 11, handleListOffsets, aclListOffsets},
		kmsg.Metadata:                {0, 13, handleMetadata, aclMetadata},
		kmsg.ApiVersions:             {0, 5, handleApiVersions, allowAll},
		kmsg.CreateTopics:            {0, 7, handleCreateTopics, aclCreateTopics},
		kmsg.DeleteTopics:            {0, 6, handleDeleteTopics, aclDeleteTopics},
		kmsg.DeleteRecords:           {0, 2, handleDeleteRecords, aclDeleteRecords},
		kmsg.InitProducerID:          {0, 5, handleInitProducerID, aclInitProducerID},
		kmsg.OffsetForLeaderEpoch:    {0, 4, handleOffsetForLeaderEpoch, aclOffsetForLeaderEpoch},
		kmsg.DescribeConfigs:         {0, 4, handleDescribeConfigs, aclDescribeConfigs},
		kmsg.AlterConfigs:            {0, 2, handleAlterConfigs, aclAlterConfigs},
		kmsg.DescribeLogDirs:         {0, 4, handleDescribeLogDirs, aclDescribeLogDirs},
		kmsg.CreatePartitions:        {0, 3, handleCreatePartitions, aclCreatePartitions},
		kmsg.IncrementalAlterConfigs: {0, 1, handleIncrementalAlterConfigs, aclIncrementalAlterConfigs},
		kmsg.DescribeCluster:         {0, 2, handleDescribeCluster, allowAll},
		kmsg.DescribeProducers:       {0, 0, handleDescribeProducers, aclDescribeProducers},
		kmsg.DescribeTopicPartitions: {0, 0, handleDescribeTopicPartitions, aclDescribeTopicPartitions},
		// Consumer groups, classic protocol.
		kmsg.OffsetCommit:    {0, 9, handleOffsetCommit, aclOffsetCommit},
		kmsg.OffsetFetch:     {0, 9, handleOffsetFetch, aclOffsetFetch},
		kmsg.FindCoordinator: {0, 6, handleFindCoordinator, aclFindCoordinator},
		kmsg.JoinGroup:       {0, 9, handleJoinGroup, aclJoinGroup},
		kmsg.Heartbeat:       {0, 4, handleHeartbeat, aclHeartbeat},
		kmsg.LeaveGroup:      {0, 5, handleLeaveGroup, aclLeaveGroup},
		kmsg.SyncGroup:       {0, 5, handleSyncGroup, aclSyncGroup},
		kmsg.DescribeGroups:  {0, 5, handleDescribeGroups, aclDescribeGroups},
		kmsg.ListGroups:      {0, 5, handleListGroups, aclListGroups},
		kmsg.DeleteGroups:    {0, 2, handleDeleteGroups, aclDeleteGroups},
		kmsg.OffsetDelete:    {0, 0, handleOffsetDelete, aclOffsetDelete},
		// Offsets committed inside transactions (KIP-447). v5 is KIP-890's
		// implicit add of the group to the transaction, which clients
		// use with transaction.version 2 (advertised in ApiVersions).
		kmsg.TxnOffsetCommit: {0, 5, handleTxnOffsetCommit, aclTxnOffsetCommit},
		// Transactions (engine/txn). AddPartitionsToTxn v4+ is the
		// brokers' side of KIP-890; EndTxn v5+ its epoch bump per end.
		kmsg.AddPartitionsToTxn:   {0, 5, handleAddPartitionsToTxn, aclAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn:      {0, 4, handleAddOffsetsToTxn, aclAddOffsetsToTxn},
		kmsg.EndTxn:               {0, 5, handleEndTxn, aclEndTxn},
		kmsg.DescribeTransactions: {0, 0, handleDescribeTransactions, aclDescribeTransactions},
		kmsg.ListTransactions:     {0, 2, handleListTransactions, aclListTransactions},
		// Share groups (KIP-932), at Kafka 4.2's versions (v0 of these was
		// 4.0's early access; Kafka no longer serves it).
		kmsg.ShareGroupHeartbeat:       {1, 1, handleShareGroupHeartbeat, aclShareGroupHeartbeat},
		kmsg.ShareGroupDescribe:        {1, 1, handleShareGroupDescribe, aclShareGroupDescribe},
		kmsg.ShareFetch:                {1, 2, handleShareFetch, aclShareFetch},
		kmsg.ShareAcknowledge:          {1, 2, handleShareAcknowledge, aclShareAcknowledge},
		kmsg.DescribeShareGroupOffsets: {0, 1, handleDescribeShareGroupOffsets, aclDescribeShareGroupOffsets},
		kmsg.AlterShareGroupOffsets:    {0, 0, handleAlterShareGroupOffsets, aclAlterShareGroupOffsets},
		kmsg.DeleteShareGroupOffsets:   {0, 0, handleDeleteShareGroupOffsets, aclDeleteShareGroupOffsets},
		// Consumer groups, KIP-848 protocol.
		kmsg.ConsumerGroupHeartbeat: {0, 1, handleConsumerGroupHeartbeat, aclConsumerGroupHeartbeat},
		kmsg.ConsumerGroupDescribe:  {0, 1, handleConsumerGroupDescribe, aclConsumerGroupDescribe},
		// Security: SASL, ACLs, SCRAM users; each connection is offered
		// what applies to it (conn.offers).
		kmsg.SASLHandshake:                {0, 1, handleSaslHandshake, allowAll},
		kmsg.SASLAuthenticate:             {0, 2, handleSaslAuthenticate, allowAll},
		kmsg.DescribeACLs:                 {0, 3, handleDescribeACLs, aclDescribeACLs},
		kmsg.CreateACLs:                   {0, 3, handleCreateACLs, aclCreateACLs},
		kmsg.DeleteACLs:                   {0, 3, handleDeleteACLs, aclDeleteACLs},
		kmsg.DescribeUserSCRAMCredentials: {0, 0, handleDescribeUserSCRAMCredentials, aclDescribeUserSCRAMCredentials},
		kmsg.AlterUserSCRAMCredentials:    {0, 0, handleAlterUserSCRAMCredentials, aclAlterUserSCRAMCredentials},
	}
}

// offers says whether ApiVersions lists key on this connection: SASL only
// where it is used, ACL APIs only when ACLs are on, SCRAM user APIs only
// with a user store.
func (c *conn) offers(key kmsg.Key) bool {
	switch key {
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return len(c.l.mechs) > 0
	case kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs:
		return c.s.opts.ACLs
	case kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials:
		return c.s.opts.Auth != nil
	}
	return true
}

// api returns the definition of an API if this connection serves it.
func (c *conn) api(key kmsg.Key) (apiDef, bool) {
	a, ok := c.s.apis[key]
	return a, ok && c.offers(key)
}
