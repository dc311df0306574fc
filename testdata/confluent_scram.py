"""SASL/SCRAM login, produce and consume with confluent-kafka (librdkafka).

Usage:
  confluent_scram.py roundtrip BOOTSTRAP MECHANISM USER PASSWORD TOPIC KEY_HEX VALUE_HEX
      produces one record, consumes it back from the start of partition 0
      and prints "consumed KEY_HEX VALUE_HEX" of what came back.
  confluent_scram.py badauth BOOTSTRAP MECHANISM USER PASSWORD
      asks for metadata and prints "auth-failed CODE" when librdkafka
      reports an authentication error.
Exits non-zero on anything else. Every wait is bounded.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING


def conf(bootstrap, mechanism, user, password, errors):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": errors.append,
    }


def roundtrip(bootstrap, mechanism, user, password, topic, key_hex, value_hex):
    key, value = bytes.fromhex(key_hex), bytes.fromhex(value_hex)
    errors = []
    delivered = []
    p = Producer(conf(bootstrap, mechanism, user, password, errors))
    p.produce(topic, value=value, key=key, on_delivery=lambda err, msg: delivered.append((err, msg)))
    left = p.flush(30)
    if left or not delivered or delivered[0][0] is not None:
        sys.exit("produce failed: %d left, delivered %r, errors %r" % (left, delivered, errors))

    c_conf = conf(bootstrap, mechanism, user, password, errors)
    c_conf.update({"group.id": "confluent-scram", "enable.auto.commit": False})
    c = Consumer(c_conf)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                sys.exit("consume: %s" % msg.error())
            print("consumed %s %s" % ((msg.key() or b"").hex(), (msg.value() or b"").hex()))
            return
    finally:
        c.close()
    sys.exit("nothing consumed within 30s; errors %r" % errors)


def badauth(bootstrap, mechanism, user, password):
    errors = []
    p = Producer(conf(bootstrap, mechanism, user, password, errors))
    try:
        p.list_topics(timeout=2)  # makes it connect; fails, quickly
    except KafkaException as e:
        errors.append(e.args[0])
    # error_cb runs from poll.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for err in errors:
            if err.code() == KafkaError._AUTHENTICATION:
                print("auth-failed %s" % err.name())
                return
        p.poll(0.2)
    sys.exit("no authentication error within 15s; errors %r" % errors)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "roundtrip" and len(args) == 7:
        roundtrip(*args)
    elif mode == "badauth" and len(args) == 4:
        badauth(*args)
    else:
        sys.exit(__doc__)
