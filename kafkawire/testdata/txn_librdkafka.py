"""librdkafka's transactional producer against korvet (TestTxnLibrdkafka).

argv: bootstrap servers, topic. Prints one JSON object: what each step
gave. librdkafka retries retriable errors itself; a step that raises is
reported with its error name and whether it is fatal or needs an abort.
"""
import json
import sys

from confluent_kafka import KafkaException, Producer

bootstrap, topic = sys.argv[1], sys.argv[2]
out = {}


def producer():
    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": "rk-app",
        "transaction.timeout.ms": 30000,
        "message.timeout.ms": 10000,
    })


def step(name, fn):
    try:
        fn()
        out[name] = "ok"
        return True
    except KafkaException as e:
        err = e.args[0]
        kind = "fatal" if err.fatal() else "abort" if err.txn_requires_abort() else "retriable" if err.retriable() else "error"
        out[name] = "%s:%s" % (kind, err.name())
        return False


p1 = producer()
step("init", lambda: p1.init_transactions(15))

# A transaction with records: committed once the log side takes
# transactional batches; until then librdkafka asks for an abort.
step("begin1", p1.begin_transaction)
p1.produce(topic, b"committed?")
p1.flush(15)
if not step("commit1", lambda: p1.commit_transaction(15)):
    step("abort1", lambda: p1.abort_transaction(15))

# An explicit abort.
step("begin2", p1.begin_transaction)
p1.produce(topic, b"aborted")
p1.flush(15)
step("abort2", lambda: p1.abort_transaction(15))

# A zombie: a second producer with the same id fences the first.
p2 = producer()
step("init2", lambda: p2.init_transactions(15))
step("begin3", p1.begin_transaction)


def zombie():
    p1.produce(topic, b"zombie")
    p1.flush(15)
    p1.commit_transaction(15)


step("zombie_commit", zombie)

print(json.dumps(out))
