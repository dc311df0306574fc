// Package txn is korvet's transaction coordinator: Kafka's transactional
// producer protocol (InitProducerId with a transactional id,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
// ListTransactions) over a state kept in Redis.
//
// Each transactional id has one JSON value in the keys.Transactions hash
// (state.go). Every write is a compare-and-set against the value last read
// (casScript), so a coordinator that lost the id to another broker cannot
// overwrite what the new one wrote. The coordinator answers EndTxn once
// PrepareCommit or PrepareAbort is stored, then completes the transaction
// in the background: the groups' pending offsets (Offsets), the markers in
// every partition (Markers), then CompleteCommit or CompleteAbort. Both
// are idempotent, so a coordinator that takes over a Prepare state (after a
// crash or an ownership move) simply does them again.
//
// A sweep (Options.CheckInterval) aborts Ongoing transactions older than
// their timeout, bumping the epoch so the producer is fenced, retries
// completions that failed, and deletes ids idle longer than
// Options.IDExpiration.
package txn
