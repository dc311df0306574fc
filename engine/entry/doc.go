// Package entry maps a Kafka record to the field/value pairs of one Redis
// stream entry and back, losslessly.
//
// The layout is a contract: any Redis client reading a korvet stream can
// interpret it, and the encoder reproduces every record byte for byte.
// An entry holds these fields, in this order:
//
//  1. __ts: the record timestamp in decimal milliseconds (may be negative).
//     Then, for a record of a transactional batch or a control record
//     only: __txn, "<producer id>.<producer epoch>" in decimal; and for a
//     control record only: __ctl, empty.
//  2. __key: the key bytes. Absent when the key is null, present and empty
//     when the key is empty.
//  3. One field per header, in order, duplicates kept: __header.{name}
//     holding the header value, or __hnull.{name} with an empty value when
//     the header value is null. Names are arbitrary bytes.
//  4. The value, in one of three forms described next.
//
// The value takes one of these forms:
//
//   - null (a tombstone): no value field at all;
//   - a JSON object that can be flattened: one field per top-level member,
//     named by the member name and holding the member's raw JSON text
//     exactly as it appeared (e.g. "x", 12.50, {"a": [1, 2]}), preceded by
//     a __ws field when the object has whitespace outside member values;
//   - anything else: __value holding the exact bytes;
//   - for topics with korvet.storage.compression=zstd, when smaller than
//     the value: __zstd.<v>, one zstd frame (RFC 8878) of the exact value
//     bytes, v being the topic's dictionary version in decimal (0: no
//     dictionary; otherwise the frame's dictionary ID is v). The frame
//     declares its content size and carries no checksum; a reader refuses
//     a frame declaring more than it allows before allocating for it.
//     Compression wins over flattening; control records are never
//     compressed. Korvet releases before this form cannot read it.
//
// A value is flattened only when it is a valid JSON object (RFC 8259,
// strict UTF-8) with 1 to 1000 members and unique member names that
// contain no escape sequence and do not start with "__", and rebuilding it
// as described next reproduces it exactly. So a flattened value is exactly
// the fields whose names do not start with "__" (plus __ws), and an entry
// with no such field, no __value and no __zstd.<v> is a tombstone
// (IsValueField). Flattening lets
// Redis-side tooling see JSON documents as ordinary stream fields;
// everything else is stored opaquely.
//
// Without __ws, the value is compact and rebuilds as
//
//	"{" + join(`"name":value`, ",") + "}"
//
// With __ws, whitespace (only space, tab, LF and CR) surrounds the
// structure; member values keep theirs inside their own text. The value
// rebuilds as
//
//	L "{" N1 `"name1"` B1 ":" A1 value1 V1 "," N2 `"name2"` ... An valuen Vn "}" T
//
// where L is the run before "{", Ni the run before member i's name, Bi
// the run between its name and ":", Ai the run between ":" and its value,
// Vi the run after its value, and T the run after "}". The __ws value (the
// marker) is one form byte, then the runs separated by "." (a byte that is
// never whitespace). Its form is one of:
//
//	u A "." S "." F "." E "." T "." V "." B "." L
//	g L "." N1 "." B1 "." A1 "." V1 "." N2 ... "." Vn "." T
//
// "u" (uniform) gives every member the same runs: Ai = A and Bi = B for
// all i, N1 = F and Ni = S for i > 1, Vn = E and Vi = V for i < n. Runs
// left off at the end are empty, so it holds 1 to 8 runs (S and V are
// unused by a one-member object). Python's json.dumps defaults, as in
// {"a": 1, "b": 2}, give "u" + " " + "." + " "; json.dumps(indent=2)
// gives "u" + " " + "." + "\n  " + "." + "\n  " + "." + "\n".
// "g" (general) lists every run, exactly 4n + 2 of them for n members.
// Any other marker, a byte other than whitespace or "." after the form
// byte, or the wrong number of runs is malformed. __ws comes right after
// the headers, before the member fields, and is written only when some
// run is not empty.
//
// A control record is a transaction's commit or abort marker, written by
// the broker at its own offset with entry ID "<offset>-1": __ts (when it
// was written), __txn, __ctl, __key holding Kafka's control record key
// (int16 version 0, int16 type: 0 abort, 1 commit) and __value holding its
// value (int16 version 0, int32 coordinator epoch), never flattened.
// Entries without __txn belong to no transaction.
//
// Header names are Kafka strings and never null: a header decodes with a
// non-nil (possibly empty) name.
//
// The entry's ID is "<offset>-<1+codec>" (AppendID, ParseID): the record's
// Kafka offset, then 1 + the compression codec its producer used (1 none,
// 2 gzip, 3 snappy, 4 lz4, 5 zstd), so that a fetch hands records back
// compressed as they came at no cost in fields. Entries from before the
// codec was kept end in "-1", which reads as uncompressed. Offsets make
// IDs ascend as Redis requires. The partition's batches stream uses the
// same form with codec 0: "<last offset of the append>-1".
package entry
