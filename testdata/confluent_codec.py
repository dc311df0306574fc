"""Produce with a compression codec and consume back, with confluent-kafka (librdkafka).

Usage:
  confluent_codec.py BOOTSTRAP TOPIC CODEC VALUE_HEX...
      produces the values, in order, to partition 0 of TOPIC with
      compression.type CODEC, in one batch if it fits; then consumes
      partition 0 from the beginning and prints "value HEX" for each of
      the first len(VALUE_HEX) records.
Exits non-zero on anything else. Every wait is bounded.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition, OFFSET_BEGINNING


def main(bootstrap, topic, codec, values_hex):
    values = [bytes.fromhex(v) for v in values_hex]
    errors = []
    delivered = []
    p = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "linger.ms": 100,
        "error_cb": errors.append,
    })
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, msg: delivered.append(err))
    left = p.flush(30)
    if left or len(delivered) != len(values) or any(e is not None for e in delivered):
        sys.exit("produce failed: %d left, delivered %r, errors %r" % (left, delivered, errors))

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "confluent-codec",
        "enable.auto.commit": False,
        "error_cb": errors.append,
    })
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                sys.exit("consume: %s" % msg.error())
            got.append(msg.value() or b"")
    finally:
        c.close()
    if len(got) < len(values):
        sys.exit("consumed %d of %d records within 30s; errors %r" % (len(got), len(values), errors))
    for v in got:
        print("value %s" % v.hex())


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
