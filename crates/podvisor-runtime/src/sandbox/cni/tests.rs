//! The invocation protocol, against fake plugins (shell scripts) that record what they got.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
use serde_json::{Value, json};

use super::*;

struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("pv-cni-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        Fixture { dir }
    }

    fn log(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// A plugin that appends `<type> <command> <stdin>` to the log and prints `stdout`.
    fn plugin(&self, name: &str, body: &str) {
        let path = self.dir.join("bin").join(name);
        let script = format!(
            "#!/bin/sh\nin=$(cat)\necho \"{name} $CNI_COMMAND $CNI_CONTAINERID $CNI_IFNAME $CNI_NETNS $CNI_ARGS $in\" >> {}\n{body}\n",
            self.log().display()
        );
        podvisor_testkit::write_script(&path, &script);
    }

    fn cni(&self) -> Cni {
        Cni::new(
            vec![self.dir.join("nowhere"), self.dir.join("bin")],
            self.dir.join("cache"),
        )
    }

    fn calls(&self) -> Vec<(String, String, Value)> {
        fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let mut it = l.splitn(7, ' ');
                let plugin = it.next().unwrap().to_owned();
                let cmd = it.next().unwrap().to_owned();
                let rest: Vec<_> = it.collect();
                let conf = serde_json::from_str(rest[4]).unwrap();
                (plugin, cmd, conf)
            })
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn attachment() -> Attachment {
    Attachment {
        container_id: "sb1".to_owned(),
        netns: PathBuf::from("/s/pods/u/ns/net"),
        ifname: POD_IFNAME.to_owned(),
        args: kubernetes_args("default", "web", "uid-1", "sb1"),
        port_mappings: vec![PortMapping {
            host_port: 8080,
            container_port: 80,
            protocol: "tcp".to_owned(),
            host_ip: String::new(),
        }],
    }
}

fn two_plugin_list() -> NetworkConfigList {
    NetworkConfigList::from_conflist_bytes(
        br#"{"cniVersion":"1.0.0","name":"net1","plugins":[
            {"type":"first","opt":1},
            {"type":"second","capabilities":{"portMappings":true}}]}"#,
    )
    .unwrap()
}

const FIRST_RESULT: &str = r#"{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/s/pods/u/ns/net"}],"ips":[{"interface":0,"address":"10.244.0.9/16","gateway":"10.244.0.1"}]}"#;

#[tokio::test]
async fn add_chains_prev_results_in_order_and_del_runs_in_reverse_with_the_cached_result() {
    let f = Fixture::new("order");
    f.plugin("first", &format!("echo '{FIRST_RESULT}'"));
    // The second prints its own result: the list's result is the last plugin's.
    let second = FIRST_RESULT.replace("10.244.0.9", "10.244.0.10");
    f.plugin(
        "second",
        &format!(r#"if [ "$CNI_COMMAND" = ADD ]; then echo '{second}'; fi"#),
    );
    let cni = f.cni();
    let list = two_plugin_list();
    let att = attachment();
    let result = cni.add(&list, &att).await.unwrap();
    assert_eq!(
        result.pod_ips(),
        vec!["10.244.0.10".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        cni.cached_result(&list, &att).unwrap().pod_ips(),
        result.pod_ips()
    );
    cni.check(&list, &att).await.unwrap();
    cni.del(&list, &att).await.unwrap();
    assert_eq!(cni.cached_result(&list, &att), None);

    let calls = f.calls();
    let order: Vec<_> = calls.iter().map(|(p, c, _)| format!("{p} {c}")).collect();
    assert_eq!(
        order,
        [
            "first ADD",
            "second ADD",
            "first CHECK",
            "second CHECK",
            "second DEL",
            "first DEL"
        ]
    );
    // Every plugin gets the list's name and version.
    for (_, _, conf) in &calls {
        assert_eq!(conf["name"], "net1");
        assert_eq!(conf["cniVersion"], "1.0.0");
    }
    // The first ADD has no prevResult; the second gets the first's result.
    assert!(calls[0].2.get("prevResult").is_none());
    assert_eq!(calls[0].2["opt"], 1);
    assert_eq!(
        calls[1].2["prevResult"]["ips"][0]["address"],
        "10.244.0.9/16"
    );
    // CHECK and DEL get the cached (final) result.
    for call in &calls[2..] {
        assert_eq!(call.2["prevResult"]["ips"][0]["address"], "10.244.0.10/16");
    }
    // runtimeConfig only for the plugin that declares the capability.
    assert!(calls[0].2.get("runtimeConfig").is_none());
    assert_eq!(
        calls[1].2["runtimeConfig"],
        json!({"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]})
    );
}

/// A sandbox is released with the network it was attached with (its record), not the one
/// configured now, and with the result its ADD printed even when the cache is gone.
#[tokio::test]
async fn del_recorded_runs_the_recorded_list_with_the_recorded_result() {
    let f = Fixture::new("recorded");
    f.plugin("first", &format!("echo '{FIRST_RESULT}'"));
    f.plugin(
        "second",
        &format!(r#"if [ "$CNI_COMMAND" = ADD ]; then echo '{FIRST_RESULT}'; fi"#),
    );
    let cni = f.cni();
    let list = two_plugin_list();
    let att = attachment();
    let result = cni.add(&list, &att).await.unwrap();
    let record = AttachedNetwork::new(&list, &result);
    // Through JSON, as `network.json` keeps it.
    let record: AttachedNetwork =
        serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
    assert_eq!(record.list().unwrap(), list);
    // The cache is lost (a cleaned state directory): the record has the result.
    fs::remove_dir_all(f.dir.join("cache")).unwrap();
    cni.del_recorded(&record, &att).await.unwrap();
    let calls = f.calls();
    let dels: Vec<_> = calls.iter().filter(|(_, c, _)| c == "DEL").collect();
    let order: Vec<&str> = dels.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(order, ["second", "first"]);
    for (_, _, conf) in &dels {
        assert_eq!(conf["name"], "net1");
        assert_eq!(conf["prevResult"]["ips"][0]["address"], "10.244.0.9/16");
    }
    // A damaged record says so.
    let damaged = AttachedNetwork {
        config: json!({"name": "net1"}),
        ..record
    };
    let err = cni.del_recorded(&damaged, &att).await.unwrap_err();
    assert!(
        err.to_string().contains("the record of network net1"),
        "{err}"
    );
}

#[tokio::test]
async fn the_environment_carries_the_attachment() {
    let f = Fixture::new("env");
    f.plugin(
        "first",
        "env | grep ^CNI_ | sort > $(dirname $0)/../env; echo '{}'",
    );
    let list = NetworkConfigList::from_conflist_bytes(
        br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"first"}]}"#,
    )
    .unwrap();
    f.cni().add(&list, &attachment()).await.unwrap();
    let env = fs::read_to_string(f.dir.join("env")).unwrap();
    let bin = f.dir.join("bin");
    let expected = format!(
        "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=sb1;K8S_POD_UID=uid-1\n\
         CNI_COMMAND=ADD\nCNI_CONTAINERID=sb1\nCNI_IFNAME=eth0\nCNI_NETNS=/s/pods/u/ns/net\n\
         CNI_PATH={}:{}\n",
        f.dir.join("nowhere").display(),
        bin.display()
    );
    assert_eq!(env, expected);
}

#[tokio::test]
async fn an_error_object_becomes_a_plugin_error_with_code_and_message() {
    let f = Fixture::new("error");
    f.plugin(
        "first",
        r#"echo '{"cniVersion":"1.0.0","code":11,"msg":"no IP addresses available in range set","details":"10.244.0.1-10.244.255.254"}'; exit 1"#,
    );
    let list = two_plugin_list();
    let err = f.cni().add(&list, &attachment()).await.unwrap_err();
    match &err {
        CniError::Plugin {
            plugin,
            command,
            error,
        } => {
            assert_eq!(plugin, "first");
            assert_eq!(*command, "ADD");
            assert_eq!(error.code, 11);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "plugin type=\"first\" failed (ADD): no IP addresses available in range set; 10.244.0.1-10.244.255.254 (code 11)"
    );
    // The chain stopped at the failing plugin.
    assert_eq!(f.calls().len(), 1);
}

#[tokio::test]
async fn a_crash_without_an_error_object_reports_status_and_output() {
    let f = Fixture::new("crash");
    f.plugin("first", "echo 'panic: boom' >&2; exit 2");
    let err = f
        .cni()
        .add(&two_plugin_list(), &attachment())
        .await
        .unwrap_err();
    assert!(matches!(err, CniError::PluginFailed { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin type=\"first\" failed (ADD): exit status: 2: panic: boom"
    );
}

#[tokio::test]
async fn a_missing_plugin_names_the_directories_searched() {
    let f = Fixture::new("missing");
    let err = f
        .cni()
        .add(&two_plugin_list(), &attachment())
        .await
        .unwrap_err();
    assert!(
        matches!(err, CniError::PluginNotFound { ref plugin, .. } if plugin == "first"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_plugin_past_its_timeout_is_killed_with_its_process_group() {
    let f = Fixture::new("timeout");
    let marker = f.dir.join("child.pid");
    f.plugin(
        "first",
        &format!("sleep 300 & echo $! > {}; wait", marker.display()),
    );
    let cni = f.cni().with_timeout(Duration::from_millis(300));
    let start = Instant::now();
    let err = cni
        .add(&two_plugin_list(), &attachment())
        .await
        .unwrap_err();
    assert!(matches!(err, CniError::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    let pid: i32 = fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
    // The grandchild (the plugin's `sleep`) is gone or a zombie awaiting its reaper.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
            .flatten();
        if matches!(state, None | Some('Z' | 'X')) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the plugin's child {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn del_without_a_cached_result_runs_every_plugin_without_prev_result() {
    let f = Fixture::new("delnocache");
    f.plugin("first", "true");
    f.plugin("second", "true");
    let cni = f.cni();
    cni.del(&two_plugin_list(), &attachment()).await.unwrap();
    let calls = f.calls();
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|(_, c, conf)| c == "DEL" && conf.get("prevResult").is_none())
    );
    // CHECK before any ADD is an error, not a silent pass.
    assert!(cni.check(&two_plugin_list(), &attachment()).await.is_err());
}

#[test]
fn host_ports_of_the_pod_become_port_mappings() {
    let port = |c: i32, h: Option<i32>, proto: Option<&str>, ip: Option<&str>| ContainerPort {
        container_port: c,
        host_port: h,
        protocol: proto.map(str::to_owned),
        host_ip: ip.map(str::to_owned),
        ..Default::default()
    };
    let spec = PodSpec {
        containers: vec![Container {
            name: "c".to_owned(),
            ports: Some(vec![
                port(80, Some(8080), Some("TCP"), None),
                port(53, Some(5353), Some("UDP"), Some("127.0.0.1")),
                port(9090, None, None, None),
            ]),
            ..Default::default()
        }],
        ..Default::default()
    };
    let maps = PortMapping::from_pod_spec(&spec);
    assert_eq!(
        serde_json::to_value(&maps).unwrap(),
        json!([
            {"hostPort":8080,"containerPort":80,"protocol":"tcp"},
            {"hostPort":5353,"containerPort":53,"protocol":"udp","hostIP":"127.0.0.1"}
        ])
    );
}

#[test]
fn the_loopback_network_is_go_cnis() {
    let lo = loopback_network();
    assert_eq!(lo.name, "cni-loopback");
    assert_eq!(lo.plugins[0]["type"], "loopback");
    assert!(!lo.has_cached_results());
    let _ = Path::new(DEBIAN_PLUGIN_DIR);
}
