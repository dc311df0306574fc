# kafka-python 2.0 against korvet: ApiVersions/Metadata v0 probes, then
# Produce and Fetch with the versions it picks. Prints "ok N" on success.
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition

addr, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = KafkaProducer(bootstrap_servers=addr, acks="all", linger_ms=5)
futs = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)]) for i in range(n)]
p.flush(30)
offs = [f.get(timeout=30).offset for f in futs]
assert offs == list(range(n)), offs[:10]
p.close()

c = KafkaConsumer(bootstrap_servers=addr, group_id=None, auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=10000)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = []
for m in c:
    got.append(m)
    if len(got) == n:
        break
c.close()
assert len(got) == n, len(got)
for i, m in enumerate(got):
    assert m.offset == i and m.key == b"k%d" % i and m.value == b"v%d" % i, m
    assert list(m.headers) == [("h", b"%d" % i)], m.headers
print("ok", n)
