"""librdkafka's transactional producer and read_committed consumer
against korvet (Debian's python3-confluent-kafka).

usage: txn_librdkafka.py BOOTSTRAP TOPIC OUT_TOPIC

Commits one transaction, aborts one, commits another, then runs one
consume-transform-produce transaction that commits a group's offsets
with send_offsets_to_transaction, and fences a zombie producer. It
checks what read_committed and read_uncommitted consumers see, byte for
byte, prints one line per check and exits non-zero on the first
failure.
"""
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic, out_topic = sys.argv[1:4]
TIMEOUT = 30


def fail(msg):
    print("FAIL " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def producer(txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    p.init_transactions(TIMEOUT)
    return p


def txn(p, prefix, n, commit):
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=("%s%d" % (prefix, i)).encode(), value=("%s-value-%d" % (prefix, i)).encode(), partition=i % 2)
    p.flush(TIMEOUT)  # the records are in the log before the end
    if commit:
        p.commit_transaction(TIMEOUT)
    else:
        p.abort_transaction(TIMEOUT)


def read(isolation, t, group=None):
    conf = {"bootstrap.servers": bootstrap, "group.id": group or "py-read-" + isolation,
            "isolation.level": isolation, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "enable.partition.eof": True}
    c = Consumer(conf)
    c.subscribe([t])
    got, eof = [], set()
    parts = None
    while parts is None or len(eof) < len(parts):
        m = c.poll(TIMEOUT)
        if m is None:
            fail("read %s %s: timed out" % (isolation, t))
        if parts is None:
            parts = c.assignment()
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                continue
            fail("read %s: %s" % (isolation, m.error()))
        got.append((m.key().decode(), m.value().decode()))
    c.close()
    return got


a = producer("py-txn")
txn(a, "c", 10, True)
txn(a, "x", 10, False)
txn(a, "d", 10, True)

want = sorted([("c%d" % i, "c-value-%d" % i) for i in range(10)] + [("d%d" % i, "d-value-%d" % i) for i in range(10)])
got = sorted(read("read_committed", topic))
if got != want:
    fail("read_committed saw %d records %s, want the 20 committed" % (len(got), got[:5]))
print("OK read_committed: %d committed records, none of the aborted" % len(got), flush=True)
unc = sorted(read("read_uncommitted", topic))
if len([k for k, _ in unc if k.startswith("x")]) != 10 or len(unc) != 30:
    fail("read_uncommitted saw %d records, want 30 (the aborted ones too)" % len(unc))
print("OK read_uncommitted: %d records" % len(unc), flush=True)

# Consume-transform-produce: the group's offsets commit with the output.
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-eos", "isolation.level": "read_committed",
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
c.subscribe([topic])
seen, eof, parts = 0, set(), None
a.begin_transaction()
while parts is None or len(eof) < len(parts):
    m = c.poll(TIMEOUT)
    if m is None:
        fail("eos consumer timed out")
    if parts is None:
        parts = c.assignment()
    if m.error():
        if m.error().code() == -191:
            eof.add(m.partition())
            continue
        fail("eos consumer: %s" % m.error())
    a.produce(out_topic, key=m.key(), value=b"out-" + m.value())
    seen += 1
a.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
a.commit_transaction(TIMEOUT)
committed = c.committed(c.assignment(), TIMEOUT)
c.close()
ends = {}
for tp in committed:
    if tp.offset < 0:
        fail("no committed offset for partition %d after the transaction" % tp.partition)
    ends[tp.partition] = tp.offset
out = sorted(read("read_committed", out_topic))
if len(out) != seen or seen != 20 or any(not v.startswith("out-") for _, v in out):
    fail("output has %d records, consumed %d" % (len(out), seen))
print("OK send_offsets_to_transaction: %d records transformed, group offsets %s" % (seen, sorted(ends.items())), flush=True)

# A second producer with the same transactional id fences the first.
b = producer("py-txn")
try:
    a.begin_transaction()
    a.produce(topic, key=b"zombie", value=b"zombie")
    a.flush(TIMEOUT)
    a.commit_transaction(TIMEOUT)
    fail("the zombie committed")
except KafkaException as e:
    err = e.args[0]
    if not err.fatal() and "fenced" not in str(err).lower():
        fail("zombie got %s, want a fatal fencing error" % err)
    print("OK zombie fenced: %s" % err.name(), flush=True)
txn(b, "e", 4, True)
got = read("read_committed", topic, group="py-final")
if any(k == "zombie" for k, _ in got) or len(got) != 24:
    fail("after the fencing read_committed saw %d records (zombie: %s)" % (len(got), any(k == "zombie" for k, _ in got)))
print("OK new producer committed; the zombie's record is not visible", flush=True)
print("PASS", flush=True)
