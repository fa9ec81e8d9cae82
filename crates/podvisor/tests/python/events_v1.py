"""The official Python `kubernetes` client's EventsV1Api and VersionApi against `podvisor serve`.

Usage: events_v1.py KUBECONFIG

Creates an events.k8s.io/v1 Event, reads it back in both APIs (the same object), bumps its
series with a merge patch as recorders do, lists with a `regarding.name` field selector, deletes
it; reads the version through `/version/`. Prints one `ok: ...` line per step.
"""

import datetime
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def step(message):
    print(f"ok: {message}", flush=True)


def main():
    config.load_kube_config(config_file=sys.argv[1])
    events = client.EventsV1Api()
    core = client.CoreV1Api()
    ns = "default"
    now = datetime.datetime.now(datetime.timezone.utc)

    version = client.VersionApi().get_code()
    assert version.major == "1", version
    step(f"version {version.git_version}")

    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="thing.1"),
        event_time=now,
        reporting_controller="example.com/controller",
        reporting_instance="controller-0",
        action="Reconcile",
        reason="Synced",
        type="Normal",
        note="synced the thing",
        regarding=client.V1ObjectReference(kind="Pod", name="thing", namespace=ns),
    )
    made = events.create_namespaced_event(ns, body)
    assert made.note == "synced the thing", made
    assert made.regarding.name == "thing", made
    step("created thing.1")

    as_core = core.read_namespaced_event("thing.1", ns)
    assert as_core.message == "synced the thing", as_core
    assert as_core.involved_object.name == "thing", as_core
    assert as_core.reporting_component == "example.com/controller", as_core
    step("read it as a core/v1 Event")

    patched = events.patch_namespaced_event(
        "thing.1",
        ns,
        {"series": {"count": 2, "lastObservedTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}},
    )
    assert patched.series.count == 2, patched
    step("patched its series")

    listed = events.list_namespaced_event(ns, field_selector="regarding.name=thing")
    assert [e.metadata.name for e in listed.items] == ["thing.1"], listed
    step("listed it by regarding.name")

    try:
        events.create_namespaced_event(
            ns, client.EventsV1Event(metadata=client.V1ObjectMeta(name="bad.1"), event_time=now)
        )
        raise AssertionError("an event without reportingController was accepted")
    except ApiException as e:
        assert e.status == 422, e
        assert "reportingController: Required value" in e.body, e.body
    step("refused one without reportingController")

    events.delete_namespaced_event("thing.1", ns)
    left = events.list_namespaced_event(ns, field_selector="regarding.name=thing")
    assert left.items == [], left
    step("deleted it")


if __name__ == "__main__":
    main()
