"""confluent-kafka (librdkafka) producer and group consumer for the
several-brokers tests.

Usage:
  cluster_client.py produce BOOTSTRAP TOPIC FIRST COUNT
      produces values seq=FIRST.. seq=FIRST+COUNT-1 (key key-NNN) with an
      idempotent acks=all producer and prints "acked P O VALUE" for each
      delivered record, "failed VALUE ERROR" for each that was not.
  cluster_client.py consume BOOTSTRAP TOPIC GROUP COUNT SECONDS
      consumes in GROUP, committing after each record, until it has seen
      COUNT distinct values; prints "got P O VALUE" for each record.
      Exits 1 after SECONDS without them.
Every wait is bounded.
"""
import sys
import time

from confluent_kafka import Consumer, Producer


def produce(bootstrap, topic, first, count):
    failed = []
    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 60000,
        "topic.metadata.refresh.interval.ms": 1000,
    })

    def done(err, msg):
        v = msg.value().decode()
        if err is not None:
            failed.append(v)
            print("failed %s %s" % (v, err), flush=True)
        else:
            print("acked %d %d %s" % (msg.partition(), msg.offset(), v), flush=True)

    for seq in range(first, first + count):
        while True:
            try:
                p.produce(topic, key=b"key-%03d" % (seq % 200), value=b"seq=%d" % seq, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(90)
    if left or failed:
        sys.exit("produce: %d not delivered, %d failed" % (left, len(failed)))


def consume(bootstrap, topic, group, count, seconds):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    c.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + seconds
    try:
        while len(seen) < count:
            if time.monotonic() > deadline:
                sys.exit("consume: %d of %d values after %ds" % (len(seen), count, seconds))
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            v = m.value().decode()
            seen.add(v)
            print("got %d %d %s" % (m.partition(), m.offset(), v), flush=True)
            try:
                c.commit(message=m, asynchronous=False)
            except Exception as e:  # a broker may be down: retried by the next commit
                print("commit failed: %s" % e, file=sys.stderr, flush=True)
    finally:
        c.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "produce":
        produce(a[1], a[2], int(a[3]), int(a[4]))
    elif len(a) == 6 and a[0] == "consume":
        consume(a[1], a[2], a[3], int(a[4]), int(a[5]))
    else:
        sys.exit(__doc__)
