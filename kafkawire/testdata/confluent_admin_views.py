"""What confluent-kafka's (librdkafka's) AdminClient sees of a broker.

usage: confluent_admin_views.py BOOTSTRAP
Prints one JSON object: the cluster id, brokers and topics (partition ->
leader, replicas, isrs) from list_topics, the groups from list_groups,
and, where this confluent-kafka has them, describe_cluster and
list_consumer_groups.
"""
import json
import sys

from confluent_kafka.admin import AdminClient

admin = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 10000})
md = admin.list_topics(timeout=10)
out = {
    "cluster_id": md.cluster_id,
    "brokers": sorted("%d@%s:%d" % (b.id, b.host, b.port) for b in md.brokers.values()),
    "topics": {
        name: {
            "error": str(t.error) if t.error else None,
            "partitions": {
                str(p.id): [p.leader, list(p.replicas), list(p.isrs)] for p in t.partitions.values()
            },
        }
        for name, t in md.topics.items()
    },
    "groups": sorted("%s/%s/%s" % (g.id, g.protocol_type, g.state) for g in admin.list_groups(timeout=10)),
}
if hasattr(admin, "describe_cluster"):
    d = admin.describe_cluster(request_timeout=10).result()
    out["describe_cluster"] = {"cluster_id": d.cluster_id, "nodes": sorted("%d@%s:%d" % (n.id, n.host, n.port) for n in d.nodes)}
if hasattr(admin, "list_consumer_groups"):
    r = admin.list_consumer_groups(request_timeout=10).result()
    out["list_consumer_groups"] = sorted(g.group_id for g in r.valid)
print(json.dumps(out, sort_keys=True))
