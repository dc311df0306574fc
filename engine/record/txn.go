package record

// Txn marks a record of a transactional batch, or a control record.
type Txn struct {
	ProducerID int64 // -1: not transactional
	Epoch      int16
	Control    bool
}
