//! `kubectl describe pod` (spec section 3.2, K12-K14), as `describePod` in kubectl's
//! `pkg/describe/describe.go` prints it: the same sections, labels, ordering, `<none>`
//! placeholders and tab alignment (Go's `tabwriter` with padding 2, column blocks broken by
//! lines without a tab), events included.
//!
//! Pure: the pod, its events and `now` (for the ages) in, text out. Times are printed in RFC
//! 1123 with a numeric zone; kubectl uses the local zone, so [`describe_pod_in`] takes it and
//! [`describe_pod`] uses UTC.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, EphemeralContainer, Event, Pod, PodSpec, PodStatus,
    Probe, ResourceRequirements, Toleration, TopologySpreadConstraint, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::tabwriter::align;
use crate::duration::human_signed_duration;

mod volumes;

/// Annotation kubectl never shows (`skipAnnotations`).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Longer `key: value` annotations are printed on their own lines, cut at this many bytes.
const MAX_ANNOTATION_LEN: usize = 140;
/// How Go prints the zero `metav1.Time` in RFC 1123Z (an unset timestamp).
const ZERO_TIME: &str = "Mon, 01 Jan 0001 00:00:00 +0000";

/// `kubectl describe pod` output for `pod` and its `events`, ages relative to `now`, times in
/// UTC.
pub fn describe_pod(pod: &Pod, events: &[Event], now: Timestamp) -> String {
    describe_pod_in(pod, events, now, &TimeZone::UTC)
}

/// [`describe_pod`] with times shown in `zone` (kubectl shows the local zone).
pub fn describe_pod_in(pod: &Pod, events: &[Event], now: Timestamp, zone: &TimeZone) -> String {
    let mut w = Writer {
        out: String::new(),
        now,
        zone,
    };
    w.pod(pod, events);
    align(&w.out, 0, 2)
}

/// kubectl's `PrefixWriter` over the text handed to the tab writer: two spaces per level, and
/// terminal escapes neutralised (`printers.WriteEscaped`).
struct Writer<'a> {
    out: String,
    now: Timestamp,
    zone: &'a TimeZone,
}

impl Writer<'_> {
    fn w(&mut self, level: usize, text: &str) {
        for _ in 0..level {
            self.out.push_str("  ");
        }
        for c in text.chars() {
            match c {
                '\x1b' => self.out.push_str("^["),
                '\r' => self.out.push_str("\\r"),
                c => self.out.push(c),
            }
        }
    }

    /// `Time.Format(time.RFC1123Z)` in the writer's zone.
    fn time(&self, t: Option<Timestamp>) -> String {
        match t {
            None => ZERO_TIME.to_owned(),
            Some(t) => t
                .to_zoned(self.zone.clone())
                .strftime("%a, %d %b %Y %H:%M:%S %z")
                .to_string(),
        }
    }

    /// `translateTimestampSince`: `<unknown>` for an unset time, else the human age.
    fn since(&self, t: Option<Timestamp>) -> String {
        match t {
            None => "<unknown>".to_owned(),
            Some(t) => human_signed_duration(self.now.duration_since(t)),
        }
    }

    fn pod(&mut self, pod: &Pod, events: &[Event]) {
        let default_spec = PodSpec::default();
        let default_status = PodStatus::default();
        let spec = pod.spec.as_ref().unwrap_or(&default_spec);
        let status = pod.status.as_ref().unwrap_or(&default_status);
        let meta = &pod.metadata;

        self.w(0, &format!("Name:\t{}\n", s(meta.name.as_ref())));
        self.w(0, &format!("Namespace:\t{}\n", s(meta.namespace.as_ref())));
        if let Some(p) = spec.priority {
            self.w(0, &format!("Priority:\t{p}\n"));
        }
        if let Some(pc) = non_empty(spec.priority_class_name.as_ref()) {
            self.w(0, &format!("Priority Class Name:\t{pc}\n"));
        }
        if let Some(rc) = non_empty(spec.runtime_class_name.as_ref()) {
            self.w(0, &format!("Runtime Class Name:\t{rc}\n"));
        }
        if let Some(sa) = non_empty(spec.service_account_name.as_ref()) {
            self.w(0, &format!("Service Account:\t{sa}\n"));
        }
        match non_empty(spec.node_name.as_ref()) {
            None => self.w(0, "Node:\t<none>\n"),
            Some(node) => {
                let host_ip = s(status.host_ip.as_ref());
                self.w(0, &format!("Node:\t{node}/{host_ip}\n"));
            }
        }
        if let Some(start) = &status.start_time {
            let text = self.time(Some(start.0));
            self.w(0, &format!("Start Time:\t{text}\n"));
        }
        self.labels("Labels", meta.labels.as_ref());
        self.annotations("Annotations", meta.annotations.as_ref());
        let phase = s(status.phase.as_ref());
        match &meta.deletion_timestamp {
            Some(deleted) if phase != "Failed" && phase != "Succeeded" => {
                let lasts = self.since(Some(deleted.0));
                self.w(0, &format!("Status:\tTerminating (lasts {lasts})\n"));
                let grace = meta.deletion_grace_period_seconds.unwrap_or(0);
                self.w(0, &format!("Termination Grace Period:\t{grace}s\n"));
            }
            _ => self.w(0, &format!("Status:\t{phase}\n")),
        }
        if let Some(reason) = non_empty(status.reason.as_ref()) {
            self.w(0, &format!("Reason:\t{reason}\n"));
        }
        if let Some(message) = non_empty(status.message.as_ref()) {
            self.w(0, &format!("Message:\t{message}\n"));
        }
        if let Some(profile) = spec
            .security_context
            .as_ref()
            .and_then(|c| c.seccomp_profile.as_ref())
        {
            self.w(0, &format!("SeccompProfile:\t{}\n", profile.type_));
            if profile.type_ == "Localhost" {
                let local = s(profile.localhost_profile.as_ref());
                self.w(0, &format!("LocalhostProfile:\t{local}\n"));
            }
        }
        self.w(0, &format!("IP:\t{}\n", s(status.pod_ip.as_ref())));
        match status.pod_ips.as_deref() {
            None | Some([]) => self.w(0, "IPs:\t<none>\n"),
            Some(ips) => {
                self.w(0, "IPs:\n");
                for ip in ips {
                    self.w(1, &format!("IP:\t{}\n", ip.ip));
                }
            }
        }
        if let Some(owner) = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
        {
            self.w(
                0,
                &format!("Controlled By:\t{}/{}\n", owner.kind, owner.name),
            );
        }
        if let Some(nominated) = non_empty(status.nominated_node_name.as_ref()) {
            self.w(0, &format!("NominatedNodeName:\t{nominated}\n"));
        }
        if let Some(resources) = &spec.resources {
            self.w(0, "Resources:\n");
            self.resources(resources, 1);
        }

        let env = EnvContext::of(pod);
        let init = spec.init_containers.as_deref().unwrap_or_default();
        if !init.is_empty() {
            let statuses = status
                .init_container_statuses
                .as_deref()
                .unwrap_or_default();
            self.containers("Init Containers", init, statuses, &env);
        }
        let statuses = status.container_statuses.as_deref().unwrap_or_default();
        self.containers("Containers", &spec.containers, statuses, &env);
        let ephemeral = spec.ephemeral_containers.as_deref().unwrap_or_default();
        if !ephemeral.is_empty() {
            let as_containers: Vec<Container> = ephemeral.iter().map(ephemeral_common).collect();
            let statuses = status
                .ephemeral_container_statuses
                .as_deref()
                .unwrap_or_default();
            self.containers("Ephemeral Containers", &as_containers, statuses, &env);
        }

        let conditions = status.conditions.as_deref().unwrap_or_default();
        let gates = spec.readiness_gates.as_deref().unwrap_or_default();
        if !gates.is_empty() {
            self.w(0, "Readiness Gates:\n  Type\tStatus\n");
            for gate in gates {
                let value = conditions
                    .iter()
                    .find(|c| c.type_ == gate.condition_type)
                    .map_or("<none>", |c| c.status.as_str());
                self.w(1, &format!("{} \t{value} \n", gate.condition_type));
            }
        }
        if !conditions.is_empty() {
            self.w(0, "Conditions:\n  Type\tStatus\n");
            for c in conditions {
                self.w(1, &format!("{} \t{} \n", c.type_, c.status));
            }
        }
        self.volumes(spec.volumes.as_deref().unwrap_or_default());
        let qos = match non_empty(status.qos_class.as_ref()) {
            Some(q) => q.to_owned(),
            None => compute_qos(spec).to_owned(),
        };
        self.w(0, &format!("QoS Class:\t{qos}\n"));
        self.labels("Node-Selectors", spec.node_selector.as_ref());
        self.tolerations(spec.tolerations.as_deref().unwrap_or_default());
        self.topology_spread(
            spec.topology_spread_constraints
                .as_deref()
                .unwrap_or_default(),
        );
        self.events(events);
    }

    /// `printLabelsMultiline`: sorted `key=value`, one per line, or `<none>`.
    fn labels(&mut self, title: &str, labels: Option<&BTreeMap<String, String>>) {
        self.w(0, &format!("{title}:\t"));
        let labels = labels.filter(|l| !l.is_empty());
        let Some(labels) = labels else {
            self.w(0, "<none>\n");
            return;
        };
        for (i, (key, value)) in labels.iter().enumerate() {
            if i != 0 {
                self.w(0, "\t");
            }
            self.w(0, &format!("{key}={value}\n"));
        }
    }

    /// `printAnnotationsMultiline`: sorted `key: value`; long or multi-line values go below
    /// their key, each line cut at 138 bytes.
    fn annotations(&mut self, title: &str, annotations: Option<&BTreeMap<String, String>>) {
        self.w(0, &format!("{title}:\t"));
        let shown: Vec<(&String, &String)> = annotations
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != LAST_APPLIED)
            .collect();
        if shown.is_empty() {
            self.w(0, "<none>\n");
            return;
        }
        for (i, (key, value)) in shown.into_iter().enumerate() {
            if i != 0 {
                self.w(0, "\t");
            }
            let value = value.strip_suffix('\n').unwrap_or(value);
            if value.len() + key.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
                self.w(0, &format!("{key}:\n"));
                for line in value.split('\n') {
                    let line = shorten(line, MAX_ANNOTATION_LEN - 2);
                    self.w(0, &format!("\t  {line}\n"));
                }
            } else {
                self.w(0, &format!("{key}: {value}\n"));
            }
        }
    }

    /// `describeContainers` for one section.
    fn containers(
        &mut self,
        label: &str,
        containers: &[Container],
        statuses: &[ContainerStatus],
        env: &EnvContext,
    ) {
        let by_name: HashMap<&str, &ContainerStatus> =
            statuses.iter().map(|s| (s.name.as_str(), s)).collect();
        let none = if containers.is_empty() { " <none>" } else { "" };
        self.w(0, &format!("{label}:{none}\n"));
        for c in containers {
            let status = by_name.get(c.name.as_str()).copied();
            self.container_basics(c, status);
            self.command(c);
            if let Some(status) = status {
                self.state("State", status.state.as_ref());
                if status
                    .last_state
                    .as_ref()
                    .is_some_and(|s| s.terminated.is_some())
                {
                    self.state("Last State", status.last_state.as_ref());
                }
                let ready = if status.ready { "True" } else { "False" };
                self.w(2, &format!("Ready:\t{ready}\n"));
                self.w(2, &format!("Restart Count:\t{}\n", status.restart_count));
            }
            if let Some(resources) = &c.resources {
                self.resources(resources, 2);
            }
            for (title, probe) in [
                ("Liveness", &c.liveness_probe),
                ("Readiness", &c.readiness_probe),
                ("Startup", &c.startup_probe),
            ] {
                if let Some(probe) = probe {
                    self.w(2, &format!("{title}:\t{}\n", describe_probe(probe)));
                }
            }
            self.env_from(c);
            self.env(c, env);
            self.mounts(c);
        }
    }

    fn container_basics(&mut self, c: &Container, status: Option<&ContainerStatus>) {
        self.w(1, &format!("{}:\n", c.name));
        if let Some(status) = status {
            let id = s(status.container_id.as_ref());
            self.w(2, &format!("Container ID:\t{id}\n"));
        }
        self.w(2, &format!("Image:\t{}\n", s(c.image.as_ref())));
        if let Some(status) = status {
            self.w(2, &format!("Image ID:\t{}\n", status.image_id));
        }
        let ports = c.ports.as_deref().unwrap_or_default();
        let port_text = |port: fn(&k8s_openapi::api::core::v1::ContainerPort) -> i32| {
            ports
                .iter()
                .map(|p| {
                    let mut text = format!("{}/{}", port(p), s(p.protocol.as_ref()));
                    if let Some(name) = non_empty(p.name.as_ref()) {
                        text = format!("{text} ({name})");
                    }
                    text
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let container_ports = port_text(|p| p.container_port);
        if container_ports.contains(',') {
            self.w(2, &format!("Ports:\t{container_ports}\n"));
        } else {
            self.w(2, &format!("Port:\t{}\n", or_none(&container_ports)));
        }
        let host_ports = port_text(|p| p.host_port.unwrap_or(0));
        if host_ports.contains(',') {
            self.w(2, &format!("Host Ports:\t{host_ports}\n"));
        } else {
            self.w(2, &format!("Host Port:\t{}\n", or_none(&host_ports)));
        }
        if let Some(profile) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.seccomp_profile.as_ref())
        {
            self.w(2, &format!("SeccompProfile:\t{}\n", profile.type_));
            if profile.type_ == "Localhost" {
                let local = s(profile.localhost_profile.as_ref());
                self.w(3, &format!("LocalhostProfile:\t{local}\n"));
            }
        }
    }

    fn command(&mut self, c: &Container) {
        for (title, items) in [("Command", &c.command), ("Args", &c.args)] {
            let items = items.as_deref().unwrap_or_default();
            if items.is_empty() {
                continue;
            }
            self.w(2, &format!("{title}:\n"));
            for item in items {
                for line in item.split('\n') {
                    self.w(3, &format!("{line}\n"));
                }
            }
        }
    }

    /// `describeStatus`: one of Running, Waiting or Terminated with its details.
    fn state(&mut self, title: &str, state: Option<&ContainerState>) {
        let default = ContainerState::default();
        let state = state.unwrap_or(&default);
        if let Some(running) = &state.running {
            self.w(2, &format!("{title}:\tRunning\n"));
            let started = self.time(running.started_at.as_ref().map(|t| t.0));
            self.w(3, &format!("Started:\t{started}\n"));
        } else if let Some(waiting) = &state.waiting {
            self.w(2, &format!("{title}:\tWaiting\n"));
            if let Some(reason) = non_empty(waiting.reason.as_ref()) {
                self.w(3, &format!("Reason:\t{reason}\n"));
            }
        } else if let Some(t) = &state.terminated {
            self.w(2, &format!("{title}:\tTerminated\n"));
            if let Some(reason) = non_empty(t.reason.as_ref()) {
                self.w(3, &format!("Reason:\t{reason}\n"));
            }
            if let Some(message) = non_empty(t.message.as_ref()) {
                self.w(3, &format!("Message:\t{message}\n"));
            }
            self.w(3, &format!("Exit Code:\t{}\n", t.exit_code));
            if let Some(signal) = t.signal.filter(|s| *s > 0) {
                self.w(3, &format!("Signal:\t{signal}\n"));
            }
            let started = self.time(t.started_at.as_ref().map(|t| t.0));
            self.w(3, &format!("Started:\t{started}\n"));
            let finished = self.time(t.finished_at.as_ref().map(|t| t.0));
            self.w(3, &format!("Finished:\t{finished}\n"));
        } else {
            self.w(2, &format!("{title}:\tWaiting\n"));
        }
    }

    /// `describeResources`: sorted limits, then sorted requests, quantities canonical.
    fn resources(&mut self, resources: &ResourceRequirements, level: usize) {
        for (title, list) in [
            ("Limits", &resources.limits),
            ("Requests", &resources.requests),
        ] {
            let Some(list) = list.as_ref().filter(|l| !l.is_empty()) else {
                continue;
            };
            self.w(level, &format!("{title}:\n"));
            for (name, quantity) in list {
                self.w(level + 1, &format!("{name}:\t{}\n", canonical(quantity)));
            }
        }
    }

    fn env_from(&mut self, c: &Container) {
        let sources = c.env_from.as_deref().unwrap_or_default();
        if sources.is_empty() {
            return;
        }
        self.w(2, "Environment Variables from:\n");
        for source in sources {
            let (from, name, optional) = if let Some(cm) = &source.config_map_ref {
                ("ConfigMap", cm.name.as_str(), cm.optional == Some(true))
            } else if let Some(secret) = &source.secret_ref {
                (
                    "Secret",
                    secret.name.as_str(),
                    secret.optional == Some(true),
                )
            } else {
                ("", "", false)
            };
            match non_empty(source.prefix.as_ref()) {
                None => self.w(3, &format!("{name}\t{from}\tOptional: {optional}\n")),
                Some(prefix) => self.w(
                    3,
                    &format!("{name}\t{from} with prefix '{prefix}'\tOptional: {optional}\n"),
                ),
            }
        }
    }

    fn env(&mut self, c: &Container, ctx: &EnvContext) {
        let vars = c.env.as_deref().unwrap_or_default();
        let none = if vars.is_empty() { "\t<none>" } else { "" };
        self.w(2, &format!("Environment:{none}\n"));
        for var in vars {
            let Some(from) = &var.value_from else {
                for (i, line) in s(var.value.as_ref()).split('\n').enumerate() {
                    if i == 0 {
                        self.w(3, &format!("{}:\t{line}\n", var.name));
                    } else {
                        self.w(3, &format!("\t{line}\n"));
                    }
                }
                continue;
            };
            if let Some(field) = &from.field_ref {
                let value = ctx.field(&field.field_path);
                let api_version = s(field.api_version.as_ref());
                let path = &field.field_path;
                self.w(
                    3,
                    &format!("{}:\t{value} ({api_version}:{path})\n", var.name),
                );
            } else if let Some(resource) = &from.resource_field_ref {
                let mut value = container_resource_value(c, &resource.resource, &resource.divisor)
                    .unwrap_or_default();
                let name = resource.resource.as_str();
                if value == "0" && (name == "limits.cpu" || name == "limits.memory") {
                    value = "node allocatable".to_owned();
                }
                self.w(3, &format!("{}:\t{value} ({name})\n", var.name));
            } else if let Some(secret) = &from.secret_key_ref {
                let optional = secret.optional == Some(true);
                self.w(
                    3,
                    &format!(
                        "{}:\t<set to the key '{}' in secret '{}'>\tOptional: {optional}\n",
                        var.name, secret.key, secret.name
                    ),
                );
            } else if let Some(cm) = &from.config_map_key_ref {
                let optional = cm.optional == Some(true);
                self.w(
                    3,
                    &format!(
                        "{}:\t<set to the key '{}' of config map '{}'>\tOptional: {optional}\n",
                        var.name, cm.key, cm.name
                    ),
                );
            }
        }
    }

    fn mounts(&mut self, c: &Container) {
        let mut mounts: Vec<_> = c.volume_mounts.iter().flatten().collect();
        let none = if mounts.is_empty() { "\t<none>" } else { "" };
        self.w(2, &format!("Mounts:{none}\n"));
        mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
        for m in mounts {
            let mut flags = vec![
                if m.read_only == Some(true) {
                    "ro"
                } else {
                    "rw"
                }
                .to_owned(),
            ];
            if let Some(sub) = non_empty(m.sub_path.as_ref()) {
                flags.push(format!("path={}", go_quote(sub)));
            }
            self.w(
                3,
                &format!("{} from {} ({})\n", m.mount_path, m.name, flags.join(",")),
            );
        }
        let mut devices: Vec<_> = c.volume_devices.iter().flatten().collect();
        if !devices.is_empty() {
            // kubectl reuses the mounts' `<none>` here.
            self.w(2, &format!("Devices:{none}\n"));
            devices.sort_by(|a, b| a.device_path.cmp(&b.device_path));
            for d in devices {
                self.w(3, &format!("{} from {}\n", d.device_path, d.name));
            }
        }
    }

    fn volumes(&mut self, volumes: &[Volume]) {
        if volumes.is_empty() {
            self.w(0, "Volumes:\t<none>\n");
            return;
        }
        self.w(0, "Volumes:\n");
        for volume in volumes {
            self.w(1, &format!("{}:\n", volume.name));
            volumes::describe_source(self, volume);
        }
    }

    /// `printPodTolerationsMultiline`: sorted by key, `key=value:Effect op=Exists for Ns`.
    fn tolerations(&mut self, tolerations: &[Toleration]) {
        self.w(0, "Tolerations:\t");
        if tolerations.is_empty() {
            self.w(0, "<none>\n");
            return;
        }
        let mut sorted: Vec<&Toleration> = tolerations.iter().collect();
        sorted.sort_by(|a, b| s(a.key.as_ref()).cmp(s(b.key.as_ref())));
        for (i, t) in sorted.into_iter().enumerate() {
            if i != 0 {
                self.w(0, "\t");
            }
            let key = s(t.key.as_ref());
            let value = s(t.value.as_ref());
            let effect = s(t.effect.as_ref());
            let mut text = key.to_owned();
            if !value.is_empty() {
                text.push('=');
                text.push_str(value);
            }
            if !effect.is_empty() {
                text.push(':');
                text.push_str(effect);
            }
            if t.operator.as_deref() == Some("Exists") && value.is_empty() {
                if !key.is_empty() || !effect.is_empty() {
                    text.push_str(" op=Exists");
                } else {
                    text.push_str("op=Exists");
                }
            }
            if let Some(seconds) = t.toleration_seconds {
                text.push_str(&format!(" for {seconds}s"));
            }
            text.push('\n');
            self.w(0, &text);
        }
    }

    fn topology_spread(&mut self, constraints: &[TopologySpreadConstraint]) {
        if constraints.is_empty() {
            return;
        }
        let mut sorted: Vec<&TopologySpreadConstraint> = constraints.iter().collect();
        sorted.sort_by(|a, b| a.topology_key.cmp(&b.topology_key));
        self.w(0, "Topology Spread Constraints:\t");
        for (i, c) in sorted.into_iter().enumerate() {
            if i != 0 {
                self.w(0, "\t");
            }
            let mut text = format!(
                "{}:{} when max skew {} is exceeded",
                c.topology_key, c.when_unsatisfiable, c.max_skew
            );
            if let Some(selector) = &c.label_selector {
                text.push_str(&format!(
                    " for selector {}",
                    format_label_selector(selector)
                ));
            }
            text.push('\n');
            self.w(0, &text);
        }
    }

    /// `DescribeEvents`: oldest first; repeated events as `<last> (x<n> over <first>)`.
    fn events(&mut self, events: &[Event]) {
        if events.is_empty() {
            self.w(0, "Events:\t<none>\n");
            return;
        }
        let mut sorted: Vec<&Event> = events.iter().collect();
        sorted.sort_by_key(|e| event_time(e));
        self.w(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
        self.w(1, "----\t------\t----\t----\t-------\n");
        for e in sorted {
            let first = match &e.event_time {
                Some(t) => self.since(Some(t.0)),
                None => self.since(e.first_timestamp.as_ref().map(|t| t.0)),
            };
            let interval = if let Some(series) = &e.series {
                let last = self.since(series.last_observed_time.as_ref().map(|t| t.0));
                format!("{last} (x{} over {first})", series.count.unwrap_or(0))
            } else if e.count.unwrap_or(0) > 1 {
                let last = self.since(e.last_timestamp.as_ref().map(|t| t.0));
                format!("{last} (x{} over {first})", e.count.unwrap_or(0))
            } else {
                first
            };
            let source = e
                .source
                .as_ref()
                .and_then(|s| non_empty(s.component.as_ref()))
                .unwrap_or_else(|| s(e.reporting_component.as_ref()));
            self.w(
                1,
                &format!(
                    "{}\t{}\t{interval}\t{source}\t{}\n",
                    s(e.type_.as_ref()),
                    s(e.reason.as_ref()),
                    s(e.message.as_ref()).trim()
                ),
            );
        }
    }
}

/// The time kubectl sorts events by (`eventTime` in `pkg/util/event`); unset sorts first.
fn event_time(e: &Event) -> Timestamp {
    let t = if let Some(series) = &e.series {
        series.last_observed_time.as_ref().map(|t| t.0)
    } else if let Some(last) = &e.last_timestamp {
        Some(last.0)
    } else {
        e.event_time.as_ref().map(|t| t.0)
    };
    t.unwrap_or(Timestamp::MIN)
}

/// `DescribeProbe`: `http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1
/// #failure=3`, `exec [cmd arg]`, `tcp-socket :8080`, `grpc <pod>:9000 service`.
pub(crate) fn describe_probe(probe: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        probe.initial_delay_seconds.unwrap_or(0),
        probe.timeout_seconds.unwrap_or(0),
        probe.period_seconds.unwrap_or(0),
        probe.success_threshold.unwrap_or(0),
        probe.failure_threshold.unwrap_or(0),
    );
    if let Some(exec) = &probe.exec {
        let command = exec.command.as_deref().unwrap_or_default().join(" ");
        format!("exec [{command}] {attrs}")
    } else if let Some(http) = &probe.http_get {
        let scheme = s(http.scheme.as_ref()).to_lowercase();
        let port = int_or_string(&http.port);
        let host = s(http.host.as_ref());
        let host = if port.is_empty() {
            host.to_owned()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        format!(
            "http-get {} {attrs}",
            url_string(&scheme, &host, s(http.path.as_ref()))
        )
    } else if let Some(tcp) = &probe.tcp_socket {
        format!(
            "tcp-socket {}:{} {attrs}",
            s(tcp.host.as_ref()),
            int_or_string(&tcp.port)
        )
    } else if let Some(grpc) = &probe.grpc {
        format!(
            "grpc <pod>:{} {} {attrs}",
            grpc.port,
            s(grpc.service.as_ref())
        )
    } else {
        format!("unknown {attrs}")
    }
}

/// Go's `url.URL{Scheme, Host, Path}.String()` for the parts a probe has.
fn url_string(scheme: &str, host: &str, path: &str) -> String {
    let mut out = String::new();
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    if !scheme.is_empty() || !host.is_empty() {
        if !host.is_empty() || !path.is_empty() {
            out.push_str("//");
        }
        out.push_str(&escape(host, |c| {
            c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"".contains(c)
        }));
    }
    let path = if path == "*" {
        path.to_owned()
    } else {
        escape(path, |c| {
            c.is_ascii_alphanumeric() || "-_.~$&+,/:;=@".contains(c)
        })
    };
    if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
        out.push('/');
    }
    out.push_str(&path);
    out
}

/// Percent-encodes every byte whose character `keep` rejects (uppercase hex, as Go does).
fn escape(text: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii() && keep(c) {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// What kubectl can resolve for a `fieldRef` env var. Its scheme has no field-label
/// conversions for pods, so only `metadata.name` and `metadata.namespace` get a value; every
/// other path shows empty.
struct EnvContext {
    name: String,
    namespace: String,
}

impl EnvContext {
    fn of(pod: &Pod) -> EnvContext {
        EnvContext {
            name: s(pod.metadata.name.as_ref()).to_owned(),
            namespace: s(pod.metadata.namespace.as_ref()).to_owned(),
        }
    }

    fn field(&self, path: &str) -> &str {
        match path {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            _ => "",
        }
    }
}

/// `ExtractContainerResourceValue`: the value a `resourceFieldRef` would get, rounded up in
/// units of the divisor; `None` for resources kubectl does not support.
fn container_resource_value(
    c: &Container,
    resource: &str,
    divisor: &Option<Quantity>,
) -> Option<String> {
    use podvisor_api::quantity::Quantity as Q;
    let divisor = divisor
        .as_ref()
        .and_then(|d| Q::parse(&d.0))
        .filter(|d| !d.is_zero())
        .unwrap_or_else(|| Q::from_units(1));
    let (list, name) = resource.split_once('.')?;
    let resources = c.resources.as_ref();
    let list = match list {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return None,
    };
    let value = list
        .and_then(|l| l.get(name))
        .and_then(|q| Q::parse(&q.0))
        .unwrap_or_default();
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let ceil_div = |a: i64, b: i64| ((a as f64) / (b as f64)).ceil() as i64;
    match name {
        "cpu" => Some(ceil_div(value.milli_value(), divisor.milli_value()).to_string()),
        "memory" | "ephemeral-storage" => {
            Some(ceil_div(value.value(), divisor.value()).to_string())
        }
        _ => None,
    }
}

/// `qos.GetPodQOS` when the status has no `qosClass`: `ComputePodQOS` over cpu and memory.
fn compute_qos(spec: &PodSpec) -> &'static str {
    use podvisor_api::quantity::Quantity as Q;
    let mut requests: BTreeMap<&str, Q> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Q> = BTreeMap::new();
    let mut guaranteed = true;
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in all {
        let r = c.resources.as_ref();
        for (name, q) in r.and_then(|r| r.requests.as_ref()).into_iter().flatten() {
            let Some(q) = qos_quantity(name, q) else {
                continue;
            };
            let entry = requests.entry(name.as_str()).or_default();
            *entry = entry.saturating_add(q);
        }
        let mut found = Vec::new();
        for (name, q) in r.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
            let Some(q) = qos_quantity(name, q) else {
                continue;
            };
            found.push(name.as_str());
            let entry = limits.entry(name.as_str()).or_default();
            *entry = entry.saturating_add(q);
        }
        if !(found.contains(&"cpu") && found.contains(&"memory")) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests
            .iter()
            .all(|(name, req)| limits.get(name) == Some(req))
        && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// A positive cpu or memory quantity (the only resources QoS looks at).
fn qos_quantity(name: &str, q: &Quantity) -> Option<podvisor_api::quantity::Quantity> {
    if name != "cpu" && name != "memory" {
        return None;
    }
    podvisor_api::quantity::Quantity::parse(&q.0).filter(|q| !q.is_zero() && !q.is_negative())
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>` when empty.
fn format_label_selector(selector: &LabelSelector) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        reqs.push((k.clone(), format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values = e.values.clone().unwrap_or_default();
        values.sort();
        let text = match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({})", e.key, values.join(",")),
        };
        reqs.push((e.key.clone(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    let text = reqs
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",");
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text
    }
}

/// The container part of an ephemeral container (the fields kubectl describes).
fn ephemeral_common(e: &EphemeralContainer) -> Container {
    Container {
        name: e.name.clone(),
        image: e.image.clone(),
        command: e.command.clone(),
        args: e.args.clone(),
        ports: e.ports.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        resources: e.resources.clone(),
        liveness_probe: e.liveness_probe.clone(),
        readiness_probe: e.readiness_probe.clone(),
        startup_probe: e.startup_probe.clone(),
        volume_mounts: e.volume_mounts.clone(),
        volume_devices: e.volume_devices.clone(),
        security_context: e.security_context.clone(),
        ..Container::default()
    }
}

/// `Quantity.String()`: the canonical form (`0.5` → `500m`, `1024Mi` → `1Gi`).
fn canonical(q: &Quantity) -> String {
    podvisor_api::quantity::Quantity::parse(&q.0).map_or_else(|| q.0.clone(), |p| p.canonical())
}

/// Go's `%q` for the strings a sub-path can hold.
fn go_quote(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

fn s(v: Option<&String>) -> &str {
    v.map_or("", String::as_str)
}

fn non_empty(v: Option<&String>) -> Option<&str> {
    v.map(String::as_str).filter(|v| !v.is_empty())
}

fn or_none(v: &str) -> &str {
    if v.is_empty() { "<none>" } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(v: serde_json::Value) -> Probe {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn probe_lines() {
        let attrs = json_attrs();
        let http = probe(
            serde_json::json!({"httpGet": {"port": "http", "host": "::1",
            "path": "/a b?x", "scheme": "HTTPS"}}),
        );
        assert_eq!(
            describe_probe(&http),
            "http-get https://[::1]:http/a%20b%3Fx delay=0s timeout=0s period=0s #success=0 #failure=0"
        );
        let grpc = probe(serde_json::json!({"grpc": {"port": 9000, "service": "health"}}));
        assert_eq!(
            describe_probe(&grpc),
            format!("grpc <pod>:9000 health {attrs}")
        );
        let tcp = probe(serde_json::json!({"tcpSocket": {"port": 80, "host": "db"}}));
        assert_eq!(describe_probe(&tcp), format!("tcp-socket db:80 {attrs}"));
    }

    fn json_attrs() -> &'static str {
        "delay=0s timeout=0s period=0s #success=0 #failure=0"
    }

    #[test]
    fn times_use_the_given_zone_and_long_annotations_wrap() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {"long": "x".repeat(150), "multi": "a\nb\n"}},
            "spec": {"containers": []},
            "status": {"startTime": "2025-01-10T12:00:00Z"}
        }))
        .unwrap();
        let zone = TimeZone::fixed(k8s_openapi::jiff::tz::offset(2));
        let now: Timestamp = "2025-01-10T12:00:00Z".parse().unwrap();
        let text = describe_pod_in(&pod, &[], now, &zone);
        assert!(
            text.contains("Start Time:   Fri, 10 Jan 2025 14:00:00 +0200\n"),
            "{text}"
        );
        let cut = format!("{}...", "x".repeat(138));
        assert!(
            text.contains(&format!(
                "Annotations:  long:\n                {cut}\n              multi:\n                a\n                b\n"
            )),
            "{text}"
        );
        assert!(text.contains("Containers: <none>\n"), "{text}");
    }
}
