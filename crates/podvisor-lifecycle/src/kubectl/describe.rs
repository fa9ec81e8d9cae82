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
    Container, ContainerState, ContainerStatus, Event, Pod, PodSpec, PodStatus,
    ResourceRequirements, Toleration, TopologySpreadConstraint, Volume,
};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::tabwriter::align;
use crate::duration::human_signed_duration;

mod format;
mod volumes;

use format::{
    EnvContext, canonical, container_resource_value, describe_probe, ephemeral_common,
    format_label_selector, go_quote, shorten,
};

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
            None => podvisor_api::pod::qos_class(spec).as_str().to_owned(),
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
        self.w(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
        self.w(1, "----\t------\t----\t----\t-------\n");
        for [type_, reason, age, from, message] in event_rows(events, self.now) {
            self.w(1, &format!("{type_}\t{reason}\t{age}\t{from}\t{message}\n"));
        }
    }
}

/// The time kubectl sorts events by (`eventTime` in `pkg/util/event`); unset sorts first.
/// `DescribeEvents`' rows, oldest first: Type, Reason, Age (`<last> (x<n> over <first>)` for
/// a repeated event), From, Message. `podvisor dashboard` draws the same table.
pub fn event_rows(events: &[Event], now: Timestamp) -> Vec<[String; 5]> {
    let since = |t: Option<Timestamp>| match t {
        None => "<unknown>".to_owned(),
        Some(t) => human_signed_duration(now.duration_since(t)),
    };
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| event_time(e));
    sorted
        .into_iter()
        .map(|e| {
            let first = match &e.event_time {
                Some(t) => since(Some(t.0)),
                None => since(e.first_timestamp.as_ref().map(|t| t.0)),
            };
            let interval = if let Some(series) = &e.series {
                let last = since(series.last_observed_time.as_ref().map(|t| t.0));
                format!("{last} (x{} over {first})", series.count.unwrap_or(0))
            } else if e.count.unwrap_or(0) > 1 {
                let last = since(e.last_timestamp.as_ref().map(|t| t.0));
                format!("{last} (x{} over {first})", e.count.unwrap_or(0))
            } else {
                first
            };
            let source = e
                .source
                .as_ref()
                .and_then(|s| non_empty(s.component.as_ref()))
                .unwrap_or_else(|| s(e.reporting_component.as_ref()));
            [
                s(e.type_.as_ref()).to_owned(),
                s(e.reason.as_ref()).to_owned(),
                interval,
                source.to_owned(),
                s(e.message.as_ref()).trim().to_owned(),
            ]
        })
        .collect()
}

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
