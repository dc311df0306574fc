"""confluent-kafka (librdkafka) side of TestRoundTripClients.

Records are JSON lines: {"p": partition, "o": offset, "k": hex or null,
"v": hex, "h": [[name, hex], ...]}.

Usage:
  roundtrip.py produce BOOTSTRAP TOPIC
      produces the records read from stdin, in order, with an idempotent
      acks=all producer; prints "acked P O" for each delivered record.
  roundtrip.py consume BOOTSTRAP TOPIC PARTITIONS COUNT
      reads every partition from the beginning until COUNT records came;
      prints each record as a JSON line.
Every wait is bounded; any failure exits non-zero.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING


def unhex(s):
    return None if s is None else bytes.fromhex(s)


def produce(bootstrap, topic):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 30000,
    })
    failed = []

    def done(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            print("acked %d %d" % (msg.partition(), msg.offset()), flush=True)

    for line in sys.stdin:
        r = json.loads(line)
        headers = [(name, unhex(v)) for name, v in r["h"]]
        while True:
            try:
                p.produce(topic, partition=r["p"], key=unhex(r["k"]), value=unhex(r["v"]),
                          headers=headers, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(40)
    if left or failed:
        sys.exit("produce: %d not delivered, %d failed: %s" % (left, len(failed), failed[:3]))


def consume(bootstrap, topic, partitions, count):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "roundtrip-unused",  # required; nothing is committed
        "enable.auto.commit": False,
    })
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = time.monotonic() + 40
    n = 0
    try:
        while n < count:
            if time.monotonic() > deadline:
                sys.exit("consume: %d of %d records within 40s" % (n, count))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                sys.exit("consume: %s" % m.error())
            k = m.key()
            print(json.dumps({
                "p": m.partition(), "o": m.offset(),
                "k": None if k is None else k.hex(),
                "v": (m.value() or b"").hex(),
                "h": [[name, (v or b"").hex()] for name, v in (m.headers() or [])],
            }), flush=True)
            n += 1
    finally:
        c.close()


if __name__ == "__main__":
    if sys.argv[1] == "produce":
        produce(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "consume":
        consume(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("unknown command %r" % sys.argv[1])
