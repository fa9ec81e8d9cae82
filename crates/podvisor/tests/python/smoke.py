"""Smoke test of the official Python `kubernetes` client against a real `podvisor serve`.

Usage: smoke.py KUBECONFIG POD_NAME MARKER

Creates a pod, lists it, watches it until Running, reads its logs, deletes it with a grace
period (the client puts gracePeriodSeconds in the query) and watches it disappear. Prints one
`ok: ...` line per step; any failure raises (exit status 1) with what was seen.
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

TIMEOUT = 30


def step(message):
    print(f"ok: {message}", flush=True)


def main():
    kubeconfig, name, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    ns = "default"

    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "python-smoke"}),
        spec=client.V1PodSpec(
            termination_grace_period_seconds=10,
            containers=[
                client.V1Container(
                    name="app",
                    image="busybox",
                    command=[
                        "sh",
                        "-c",
                        f": {marker}; echo hello from python; "
                        'trap "exit 0" TERM; while true; do sleep 1; done',
                    ],
                )
            ],
        ),
    )
    created = v1.create_namespaced_pod(ns, body)
    assert created.metadata.name == name, created.metadata
    assert created.metadata.uid, created.metadata
    uid = created.metadata.uid
    step(f"created {name} (uid {uid})")

    pods = v1.list_namespaced_pod(ns, label_selector="app=python-smoke")
    names = [p.metadata.name for p in pods.items]
    assert names == [name], names
    assert pods.metadata.resource_version, pods.metadata
    step(f"listed {names} at resourceVersion {pods.metadata.resource_version}")

    # Watch from the list's version until the pod runs.
    w = watch.Watch()
    phase = None
    deadline = time.monotonic() + TIMEOUT
    for event in w.stream(
        v1.list_namespaced_pod,
        ns,
        field_selector=f"metadata.name={name}",
        resource_version=pods.metadata.resource_version,
        timeout_seconds=TIMEOUT,
    ):
        pod = event["object"]
        assert isinstance(pod, client.V1Pod), type(pod)
        assert event["type"] in ("ADDED", "MODIFIED"), event["type"]
        phase = pod.status.phase if pod.status else None
        if phase == "Running":
            w.stop()
            break
        assert time.monotonic() < deadline, f"still {phase} after {TIMEOUT}s"
    assert phase == "Running", f"the watch ended with the pod {phase}"
    step("watched it to Running")

    logs = ""
    deadline = time.monotonic() + TIMEOUT
    while "hello from python" not in logs:
        assert time.monotonic() < deadline, f"logs: {logs!r}"
        logs = v1.read_namespaced_pod_log(name, ns, container="app")
        time.sleep(0.2)
    assert logs == "hello from python\n", repr(logs)
    step(f"read logs {logs!r}")

    got = v1.read_namespaced_pod(name, ns)
    assert got.status.container_statuses[0].ready is not None
    rv = got.metadata.resource_version

    deleted = v1.delete_namespaced_pod(name, ns, grace_period_seconds=5)
    # The API answers a graceful delete with the pod, marked.
    assert deleted.metadata.deletion_timestamp is not None, deleted.metadata
    assert deleted.metadata.deletion_grace_period_seconds == 5, deleted.metadata
    step("deleted it with gracePeriodSeconds=5")

    gone = False
    deadline = time.monotonic() + TIMEOUT
    for event in w.stream(
        v1.list_namespaced_pod,
        ns,
        field_selector=f"metadata.name={name}",
        resource_version=rv,
        timeout_seconds=TIMEOUT,
    ):
        if event["type"] == "DELETED":
            assert event["object"].metadata.uid == uid
            gone = True
            w.stop()
            break
        assert time.monotonic() < deadline
    assert gone, "no DELETED event"
    try:
        v1.read_namespaced_pod(name, ns)
        raise AssertionError("the pod is still there")
    except ApiException as e:
        assert e.status == 404, e
    step("watched it disappear (DELETED, then 404)")


if __name__ == "__main__":
    main()
