//! Golden tests for `kubectl describe pod` (kubelet-lifecycle.md section 3.2: K12-K14).
//!
//! Each expected text was worked out line by line from kubectl's `describePod`
//! (`staging/src/k8s.io/kubectl/pkg/describe/describe.go`) and Go's `tabwriter` rules
//! (padding 2; a column is aligned only within a run of consecutive lines that all have a tab
//! in it), which is why e.g. `QoS Class:` lines up with the last volume's fields.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::kubectl::describe_pod;
use serde_json::{Value, json};

const NOW: &str = "2025-01-10T12:00:00Z";
fn now() -> Timestamp {
    NOW.parse().unwrap()
}
/// An RFC 3339 instant `secs` seconds before [`NOW`].
fn ago(secs: i64) -> String {
    now()
        .checked_sub(SignedDuration::from_secs(secs))
        .unwrap()
        .to_string()
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn event(type_: &str, reason: &str, message: &str, first: i64, last: i64, count: i32) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web.{reason}"), "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": ago(first),
        "lastTimestamp": ago(last),
        "count": count,
    }))
    .unwrap()
}

fn running_pod() -> Pod {
    pod(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                     "creationTimestamp": ago(600),
                     "labels": {"app": "web", "tier": "front"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                     "note": "hi"}},
        "spec": {
            "nodeName": "node1",
            "priority": 0,
            "serviceAccountName": "default",
            "containers": [{
                "name": "app", "image": "busybox",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"memory": "128Mi"},
                              "requests": {"cpu": "0.1", "memory": "128Mi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                  "timeoutSeconds": 1, "periodSeconds": 10,
                                  "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                                   "initialDelaySeconds": 5, "timeoutSeconds": 1,
                                   "periodSeconds": 5, "successThreshold": 1,
                                   "failureThreshold": 3},
                "startupProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 1,
                                 "periodSeconds": 2, "successThreshold": 1,
                                 "failureThreshold": 30},
                "env": [{"name": "MODE", "value": "prod"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                   "fieldPath": "metadata.name"}}},
                        {"name": "IP", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "status.podIP"}}}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                 {"name": "cfg", "mountPath": "/cfg", "readOnly": true}]
            }],
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "cfg", "hostPath": {"path": "/etc/app", "type": ""}}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.5", "podIP": "10.0.0.5",
            "podIPs": [{"ip": "10.0.0.5"}], "startTime": ago(590), "qosClass": "Burstable",
            "conditions": [{"type": "PodReadyToStartContainers", "status": "True"},
                           {"type": "Initialized", "status": "True"},
                           {"type": "Ready", "status": "True"},
                           {"type": "ContainersReady", "status": "True"},
                           {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                                   "image": "busybox", "imageID": "",
                                   "containerID": "podvisor://abc", "started": true,
                                   "state": {"running": {"startedAt": ago(585)}}}]
        }
    }))
}

/// K12, K13 (probes, env, mounts), K14 (events with a repeated one).
#[test]
fn k12_k14_running_pod_with_probes() {
    let events = vec![
        event("Normal", "Started", "Started container app", 587, 587, 1),
        event("Normal", "Created", "Created container: app", 588, 588, 1),
        event(
            "Warning",
            "Unhealthy",
            "Readiness probe failed: ",
            580,
            60,
            12,
        ),
    ];
    let expected = "\
Name:             web
Namespace:        default
Priority:         0
Service Account:  default
Node:             node1/10.0.0.5
Start Time:       Fri, 10 Jan 2025 11:50:10 +0000
Labels:           app=web
                  tier=front
Annotations:      note: hi
Status:           Running
IP:               10.0.0.5
IPs:
  IP:  10.0.0.5
Containers:
  app:
    Container ID:   podvisor://abc
    Image:          busybox
    Image ID:       
    Port:           8080/TCP
    Host Port:      0/TCP
    State:          Running
      Started:      Fri, 10 Jan 2025 11:50:15 +0000
    Ready:          True
    Restart Count:  0
    Limits:
      memory:  128Mi
    Requests:
      cpu:      100m
      memory:   128Mi
    Liveness:   http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3
    Readiness:  exec [cat /tmp/ready] delay=5s timeout=1s period=5s #success=1 #failure=3
    Startup:    tcp-socket :8080 delay=0s timeout=1s period=2s #success=1 #failure=30
    Environment:
      MODE:  prod
      POD:   web (v1:metadata.name)
      IP:     (v1:status.podIP)
    Mounts:
      /cfg from cfg (ro)
      /data from data (rw)
Conditions:
  Type                        Status
  PodReadyToStartContainers   True 
  Initialized                 True 
  Ready                       True 
  ContainersReady             True 
  PodScheduled                True 
Volumes:
  data:
    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:     
    SizeLimit:  <unset>
  cfg:
    Type:          HostPath (bare host directory volume)
    Path:          /etc/app
    HostPathType:  
QoS Class:         Burstable
Node-Selectors:    <none>
Tolerations:       <none>
Events:
  Type     Reason     Age                   From     Message
  ----     ------     ----                  ----     -------
  Normal   Created    9m48s                 kubelet  Created container: app
  Normal   Started    9m47s                 kubelet  Started container app
  Warning  Unhealthy  60s (x12 over 9m40s)  kubelet  Readiness probe failed:
";
    assert_eq!(describe_pod(&running_pod(), &events, now()), expected);
}

/// K13: a completed init container, a running sidecar (an init container with restartPolicy
/// Always), both in `Init Containers:`; an `Environment:` with nothing in it.
#[test]
fn k13_init_container_and_sidecar() {
    let p = pod(json!({
        "metadata": {"name": "web", "namespace": "prod", "uid": "u2"},
        "spec": {
            "nodeName": "node1",
            "initContainers": [
                {"name": "setup", "image": "busybox", "command": ["sh", "-c", "echo hi > /work/x"],
                 "volumeMounts": [{"name": "work", "mountPath": "/work"}]},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                 "ports": [{"containerPort": 9901, "protocol": "TCP", "name": "admin"},
                           {"containerPort": 10000, "protocol": "TCP"}]}
            ],
            "containers": [{"name": "app", "image": "busybox", "args": ["serve", "--port=80"],
                            "volumeMounts": [{"name": "work", "mountPath": "/work",
                                              "subPath": "app"}]}],
            "volumes": [{"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}],
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "192.168.1.2", "podIP": "192.168.1.2",
            "podIPs": [{"ip": "192.168.1.2"}], "startTime": ago(100), "qosClass": "BestEffort",
            "initContainerStatuses": [
                {"name": "setup", "ready": true, "restartCount": 0, "image": "busybox",
                 "imageID": "", "containerID": "podvisor://s1", "started": false,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": ago(99), "finishedAt": ago(98)}}},
                {"name": "proxy", "ready": true, "restartCount": 0, "image": "envoy",
                 "imageID": "", "containerID": "podvisor://p1", "started": true,
                 "state": {"running": {"startedAt": ago(97)}}}
            ],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "image": "busybox",
                 "imageID": "", "containerID": "podvisor://a1", "started": true,
                 "state": {"running": {"startedAt": ago(96)}}}
            ],
            "conditions": [{"type": "Initialized", "status": "True"},
                           {"type": "Ready", "status": "True"}]
        }
    }));
    let expected = "\
Name:         web
Namespace:    prod
Node:         node1/192.168.1.2
Start Time:   Fri, 10 Jan 2025 11:58:20 +0000
Labels:       <none>
Annotations:  <none>
Status:       Running
IP:           192.168.1.2
IPs:
  IP:  192.168.1.2
Init Containers:
  setup:
    Container ID:  podvisor://s1
    Image:         busybox
    Image ID:      
    Port:          <none>
    Host Port:     <none>
    Command:
      sh
      -c
      echo hi > /work/x
    State:          Terminated
      Reason:       Completed
      Exit Code:    0
      Started:      Fri, 10 Jan 2025 11:58:21 +0000
      Finished:     Fri, 10 Jan 2025 11:58:22 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:
      /work from work (rw)
  proxy:
    Container ID:   podvisor://p1
    Image:          envoy
    Image ID:       
    Ports:          9901/TCP (admin), 10000/TCP
    Host Ports:     0/TCP (admin), 0/TCP
    State:          Running
      Started:      Fri, 10 Jan 2025 11:58:23 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:         <none>
Containers:
  app:
    Container ID:  podvisor://a1
    Image:         busybox
    Image ID:      
    Port:          <none>
    Host Port:     <none>
    Args:
      serve
      --port=80
    State:          Running
      Started:      Fri, 10 Jan 2025 11:58:24 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:
      /work from work (rw,path=\"app\")
Conditions:
  Type          Status
  Initialized   True 
  Ready         True 
Volumes:
  work:
    Type:        EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:      Memory
    SizeLimit:   64Mi
QoS Class:       BestEffort
Node-Selectors:  <none>
Tolerations:     node.kubernetes.io/not-ready:NoExecute op=Exists for 300s
                 node.kubernetes.io/unreachable:NoExecute op=Exists for 300s
Events:          <none>
";
    assert_eq!(describe_pod(&p, &[], now()), expected);
}

/// K13 `Last State`, K14 aggregated BackOff: a crash-looping container.
#[test]
fn k13_crash_loop_shows_last_state() {
    let p = pod(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                     "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node1",
            "containers": [{"name": "app", "image": "busybox",
                            "command": ["sh", "-c", "exit 1"],
                            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"},
                                          "requests": {"cpu": "500m", "memory": "1024Mi"}}}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.5", "startTime": ago(300),
            "containerStatuses": [{
                "name": "app", "ready": false, "restartCount": 5, "image": "busybox",
                "imageID": "", "containerID": "podvisor://c6", "started": false,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": "back-off 2m40s restarting failed container=app pod=web_default(u1)"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                             "startedAt": ago(40), "finishedAt": ago(39)}}
            }],
            "conditions": [{"type": "Initialized", "status": "True"},
                           {"type": "Ready", "status": "False"},
                           {"type": "ContainersReady", "status": "False"}]
        }
    }));
    let events = vec![
        event("Normal", "Created", "Created container: app", 299, 40, 6),
        event("Normal", "Started", "Started container app", 299, 40, 6),
        event(
            "Warning",
            "BackOff",
            "Back-off restarting failed container app in pod web_default(u1)",
            290,
            5,
            23,
        ),
    ];
    let expected = "\
Name:         web
Namespace:    default
Node:         node1/10.0.0.5
Start Time:   Fri, 10 Jan 2025 11:55:00 +0000
Labels:       app=web
Annotations:  <none>
Status:       Running
IP:           
IPs:          <none>
Containers:
  app:
    Container ID:  podvisor://c6
    Image:         busybox
    Image ID:      
    Port:          <none>
    Host Port:     <none>
    Command:
      sh
      -c
      exit 1
    State:          Waiting
      Reason:       CrashLoopBackOff
    Last State:     Terminated
      Reason:       Error
      Exit Code:    1
      Started:      Fri, 10 Jan 2025 11:59:20 +0000
      Finished:     Fri, 10 Jan 2025 11:59:21 +0000
    Ready:          False
    Restart Count:  5
    Limits:
      cpu:     500m
      memory:  1Gi
    Requests:
      cpu:        500m
      memory:     1Gi
    Environment:  <none>
    Mounts:       <none>
Conditions:
  Type              Status
  Initialized       True 
  Ready             False 
  ContainersReady   False 
Volumes:            <none>
QoS Class:          Guaranteed
Node-Selectors:     <none>
Tolerations:        <none>
Events:
  Type     Reason   Age                  From     Message
  ----     ------   ----                 ----     -------
  Normal   Created  40s (x6 over 4m59s)  kubelet  Created container: app
  Normal   Started  40s (x6 over 4m59s)  kubelet  Started container app
  Warning  BackOff  5s (x23 over 4m50s)  kubelet  Back-off restarting failed container app in pod web_default(u1)
";
    assert_eq!(describe_pod(&p, &events, now()), expected);
}

/// K12: a pod being deleted shows `Terminating (lasts ...)` and its grace period; the
/// deletion timestamp lies in the future while the grace period runs, which kubectl prints
/// as `<invalid>`.
#[test]
fn k12_terminating_pod() {
    let mut p = running_pod();
    let deletion = now().checked_add(SignedDuration::from_secs(25)).unwrap();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deletion,
    ));
    p.metadata.deletion_grace_period_seconds = Some(30);
    p.metadata.labels = None;
    p.metadata.annotations = None;
    let text = describe_pod(
        &p,
        &[event(
            "Normal",
            "Killing",
            "Stopping container app",
            5,
            5,
            1,
        )],
        now(),
    );
    let head = "\
Name:                      web
Namespace:                 default
Priority:                  0
Service Account:           default
Node:                      node1/10.0.0.5
Start Time:                Fri, 10 Jan 2025 11:50:10 +0000
Labels:                    <none>
Annotations:               <none>
Status:                    Terminating (lasts <invalid>)
Termination Grace Period:  30s
IP:                        10.0.0.5
IPs:
";
    assert!(text.starts_with(head), "{text}");
    assert!(
        text.ends_with(
            "\
Events:
  Type    Reason   Age   From     Message
  ----    ------   ----  ----     -------
  Normal  Killing  5s    kubelet  Stopping container app
"
        ),
        "{text}"
    );

    // Once the grace period has run out the age is positive.
    let later = now().checked_add(SignedDuration::from_secs(40)).unwrap();
    assert!(
        describe_pod(&p, &[], later)
            .contains("Status:                    Terminating (lasts 15s)\n")
    );
}

/// K12/K13 for a pod nothing has happened to yet: no node, no statuses (so no `Container ID`,
/// `State` or `Ready` lines), no volumes, no events, QoS computed from the spec.
#[test]
fn k12_pending_pod_without_status() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "a", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1"}}}],
                 "nodeSelector": {"disk": "ssd"}}
    }));
    let expected = "\
Name:         p
Namespace:    default
Node:         <none>
Labels:       <none>
Annotations:  <none>
Status:       
IP:           
IPs:          <none>
Containers:
  a:
    Image:      busybox
    Port:       <none>
    Host Port:  <none>
    Requests:
      cpu:        1
    Environment:  <none>
    Mounts:       <none>
Volumes:          <none>
QoS Class:        Burstable
Node-Selectors:   disk=ssd
Tolerations:      <none>
Events:           <none>
";
    assert_eq!(describe_pod(&p, &[], now()), expected);
}
