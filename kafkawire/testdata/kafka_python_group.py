# kafka-python 2.0 group consumer against korvet: FindCoordinator v0,
# JoinGroup/SyncGroup/Heartbeat and OffsetCommit/OffsetFetch at the
# versions it picks. Consumes N records through group G, commits, checks
# the commits, then a second member of G finds nothing left. Prints "ok N".
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition

addr, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = KafkaProducer(bootstrap_servers=addr, acks="all")
for i in range(n):
    p.send(topic, value=b"v%d" % i, partition=i % 3)
p.flush(30)
p.close()


def consumer(timeout_ms):
    return KafkaConsumer(topic, bootstrap_servers=addr, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=10000, heartbeat_interval_ms=1000,
                         consumer_timeout_ms=timeout_ms)


c = consumer(20000)
got = set()
for m in c:
    got.add((m.partition, m.offset))
    if len(got) == n:
        break
assert len(got) == n, len(got)
c.commit()
committed = [c.committed(TopicPartition(topic, part)) for part in range(3)]
c.close()
assert committed == [n // 3] * 3, committed

c = consumer(5000)
rest = [(m.partition, m.offset) for m in c]
c.close()
assert rest == [], rest[:10]
print("ok", n)
