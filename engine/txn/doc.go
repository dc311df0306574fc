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
// The KIP-890 (transaction version 2) flow adds partitions and groups
// without AddPartitionsToTxn/AddOffsetsToTxn: the broker that receives the
// produce or TxnOffsetCommit, which may not coordinate the id, adds them
// with a compare-and-set of its own (implicit.go). So the coordinator's
// copy of a state may be older than Redis's: it reads the state again
// (refresh) before each decision and in each sweep.
//
// A sweep (Options.CheckInterval) aborts Ongoing transactions older than
// their timeout, bumping the epoch so the producer is fenced, retries
// completions that failed, and deletes ids idle longer than
// Options.IDExpiration.
package txn
