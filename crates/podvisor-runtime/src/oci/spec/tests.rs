//! Table cases for the rules of [`super::build_spec`] (the rules of each part have theirs in
//! their own module).

use super::*;
use k8s_openapi::api::core::v1::{PodSpec, SecurityContext};
use oci_spec::image::ConfigBuilder;

fn image(entrypoint: &[&str], cmd: &[&str]) -> ImageConfig {
    let list = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut b = ConfigBuilder::default();
    if !entrypoint.is_empty() {
        b = b.entrypoint(list(entrypoint));
    }
    if !cmd.is_empty() {
        b = b.cmd(list(cmd));
    }
    b.build().unwrap()
}

fn strings(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn process_args_the_kubernetes_way() {
    type Case<'a> = (
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );
    let cases: [Case; 8] = [
        // command, args, ENTRYPOINT, CMD → argv
        (&[], &[], &["/ep"], &["cmd"], &["/ep", "cmd"]),
        (&["/c"], &[], &["/ep"], &["cmd"], &["/c"]),
        (&["/c"], &["a"], &["/ep"], &["cmd"], &["/c", "a"]),
        (&[], &["a", "b"], &["/ep"], &["cmd"], &["/ep", "a", "b"]),
        (&[], &["a"], &[], &["cmd"], &["a"]),
        (&[], &[], &[], &["/bin/sh"], &["/bin/sh"]),
        (&[], &[], &["/ep"], &[], &["/ep"]),
        // ENTRYPOINT [""] clears the entrypoint.
        (&[], &[], &[""], &["/bin/sh", "-c"], &["/bin/sh", "-c"]),
    ];
    for (command, args, ep, cmd, want) in cases {
        let got = process_args(strings(command), strings(args), Some(&image(ep, cmd))).unwrap();
        assert_eq!(got, strings(want), "{command:?} {args:?} {ep:?} {cmd:?}");
    }
    for img in [None, Some(image(&[], &[])), Some(image(&[""], &[]))] {
        let err = process_args(vec![], vec![], img.as_ref()).unwrap_err();
        assert_eq!(err, SpecError::Create("no command specified".into()));
    }
}

#[test]
fn environment_layers() {
    let img = ConfigBuilder::default()
        .env(strings(&["PATH=/img/bin", "A=image", "B=image", "NOVALUE"]))
        .build()
        .unwrap();
    let kubelet = [
        ("B".to_owned(), "pod".to_owned()),
        ("C".to_owned(), "pod".to_owned()),
    ];
    let got = environment("web-0", Some(&img), &kubelet);
    let want = [
        ("PATH", "/img/bin"),
        ("HOSTNAME", "web-0"),
        ("A", "image"),
        ("B", "pod"),
        ("C", "pod"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(got, want);
    // No image: containerd's PATH; the pod may set PATH and HOSTNAME.
    let kubelet = [("HOSTNAME".to_owned(), "mine".to_owned())];
    let got = environment("web-0", None, &kubelet);
    assert_eq!(
        got,
        [
            ("PATH".to_owned(), DEFAULT_PATH.to_owned()),
            ("HOSTNAME".to_owned(), "mine".to_owned())
        ]
    );
}

struct Fixture {
    pod: Pod,
    container: Container,
    image: Option<ImageConfig>,
    env: Vec<(String, String)>,
    namespaces: PodNamespaces,
    host: HostFacts,
    users: UserDb,
}

impl Fixture {
    fn new() -> Fixture {
        let container = Container {
            name: "app".into(),
            image: Some("busybox".into()),
            ..Default::default()
        };
        Fixture {
            pod: Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some("web".into()),
                    namespace: Some("default".into()),
                    uid: Some("u1".into()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: vec![container.clone()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            container,
            image: Some(image(&["/bin/sh"], &["-c", "true"])),
            env: vec![],
            namespaces: PodNamespaces::default(),
            host: HostFacts {
                capabilities: security::capabilities_from_mask(0x0000_01ff_feff_ffff),
                ..HostFacts::default()
            },
            users: UserDb {
                passwd: Some(
                    "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n".into(),
                ),
                group: Some("root:x:0:\n".into()),
            },
        }
    }

    fn security(mut self, sc: SecurityContext) -> Fixture {
        self.container.security_context = Some(sc);
        self
    }

    fn build(&self) -> Result<Spec, SpecError> {
        build_spec(&SpecInput {
            pod: &self.pod,
            container: &self.container,
            container_id: "cid",
            image: self.image.as_ref(),
            rootfs: Path::new("/pods/u1/rootfs/app"),
            users: &self.users,
            env: &self.env,
            mounts: &[],
            pod_files: &PodFiles {
                termination_message: Some("/pods/u1/tm".into()),
                ..PodFiles::default()
            },
            namespaces: &self.namespaces,
            cgroups_path: "/podvisor/u1/app-1",
            hostname: "web",
            seccomp_localhost: None,
            host: &self.host,
        })
    }
}

#[test]
fn a_plain_container() {
    let spec = Fixture::new().build().unwrap();
    let process = spec.process().as_ref().unwrap();
    assert_eq!(
        process.args().clone().unwrap(),
        strings(&["/bin/sh", "-c", "true"])
    );
    assert_eq!(process.cwd(), Path::new("/"));
    assert_eq!((process.user().uid(), process.user().gid()), (0, 0));
    assert_eq!(process.no_new_privileges(), None);
    assert_eq!(process.terminal(), Some(false));
    // BestEffort.
    assert_eq!(process.oom_score_adj(), Some(1000));
    assert!(process.rlimits().is_none());
    let root = spec.root().as_ref().unwrap();
    assert_eq!(root.path(), Path::new("/pods/u1/rootfs/app"));
    assert_eq!(root.readonly(), Some(false));
    assert_eq!(spec.hostname().as_deref(), Some("web"));
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(
        linux.cgroups_path().as_deref(),
        Some(Path::new("/podvisor/u1/app-1"))
    );
    assert!(linux.seccomp().is_none());
    assert_eq!(linux.masked_paths().as_ref().map(Vec::len), Some(12));
    let mounts = spec.mounts().as_ref().unwrap();
    let tm = mounts.last().unwrap();
    assert_eq!(tm.destination(), Path::new("/dev/termination-log"));
    assert_eq!(tm.source().as_deref(), Some(Path::new("/pods/u1/tm")));
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(json["ociVersion"], OCI_VERSION);
    assert_eq!(json["process"]["env"][0], format!("PATH={DEFAULT_PATH}"));
    assert_eq!(json["process"]["env"][1], "HOSTNAME=web");
}

#[test]
fn no_command_is_a_create_error_worded_as_containerd() {
    let mut f = Fixture::new();
    f.image = Some(image(&[], &[]));
    let err = f.build().unwrap_err();
    assert_eq!(err.reason(), "CreateContainerError");
    assert_eq!(
        err.to_string(),
        "failed to generate container \"cid\" spec: failed to generate spec: no command specified"
    );
}

#[test]
fn command_and_args_expand_kubelet_variables() {
    let mut f = Fixture::new();
    f.container.command = Some(strings(&["/bin/echo", "$(GREETING)"]));
    f.container.args = Some(strings(&["$(MISSING)", "$$(GREETING)"]));
    f.env = vec![("GREETING".into(), "hi".into())];
    let spec = f.build().unwrap();
    assert_eq!(
        spec.process().as_ref().unwrap().args().clone().unwrap(),
        strings(&["/bin/echo", "hi", "$(MISSING)", "$(GREETING)"])
    );
}

#[test]
fn working_directory() {
    let cases: [(Option<&str>, Option<&str>, &str); 4] = [
        (None, None, "/"),
        (None, Some("/srv"), "/srv"),
        (Some("/work"), Some("/srv"), "/work"),
        (Some(""), Some("/srv"), "/srv"),
    ];
    for (container, img, want) in cases {
        let mut f = Fixture::new();
        f.container.working_dir = container.map(str::to_owned);
        let mut config = image(&["/bin/sh"], &[]);
        config.set_working_dir(img.map(str::to_owned));
        f.image = Some(config);
        let spec = f.build().unwrap();
        assert_eq!(
            spec.process().as_ref().unwrap().cwd(),
            Path::new(want),
            "{container:?} {img:?}"
        );
    }
}

#[test]
fn security_context_fields() {
    let spec = Fixture::new()
        .security(SecurityContext {
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            run_as_user: Some(65534),
            ..Default::default()
        })
        .build()
        .unwrap();
    assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(true));
    let process = spec.process().as_ref().unwrap();
    assert_eq!(process.no_new_privileges(), Some(true));
    assert_eq!((process.user().uid(), process.user().gid()), (65534, 65534));

    // allowPrivilegeEscalation: true or unset → no no_new_privs.
    for allow in [None, Some(true)] {
        let spec = Fixture::new()
            .security(SecurityContext {
                allow_privilege_escalation: allow,
                ..Default::default()
            })
            .build()
            .unwrap();
        assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), None);
    }

    // Privileged: every capability the runtime holds, no masks, no seccomp.
    let spec = Fixture::new()
        .security(SecurityContext {
            privileged: Some(true),
            seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..Default::default()
        })
        .build()
        .unwrap();
    let linux = spec.linux().as_ref().unwrap();
    assert!(linux.seccomp().is_none());
    assert_eq!(linux.masked_paths().as_ref().map(Vec::len), Some(0));
    let caps = spec
        .process()
        .as_ref()
        .unwrap()
        .capabilities()
        .clone()
        .unwrap();
    assert_eq!(caps.effective().as_ref().map(|c| c.len()), Some(40));

    // RuntimeDefault follows the capabilities left after drops.
    let spec = Fixture::new()
        .security(SecurityContext {
            seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            capabilities: Some(k8s_openapi::api::core::v1::Capabilities {
                add: Some(strings(&["SYS_TIME"])),
                drop: None,
            }),
            ..Default::default()
        })
        .build()
        .unwrap();
    let seccomp = spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    let denied = seccomp.syscalls().clone().unwrap()[0].names().clone();
    assert!(denied.contains(&"mount".to_owned()));
    assert!(!denied.contains(&"settimeofday".to_owned()));
}

#[test]
fn run_as_non_root_is_a_config_error() {
    let mut f = Fixture::new().security(SecurityContext {
        run_as_non_root: Some(true),
        ..Default::default()
    });
    let err = f.build().unwrap_err();
    assert_eq!(err.reason(), "CreateContainerConfigError");
    assert_eq!(
        err.to_string(),
        "container has runAsNonRoot and image will run as root (pod: \"web_default(u1)\", \
         container: app)"
    );
    // The image's numeric user passes.
    let mut config = image(&["/bin/sh"], &[]);
    config.set_user(Some("65534".into()));
    f.image = Some(config);
    let spec = f.build().unwrap();
    assert_eq!(spec.process().as_ref().unwrap().user().uid(), 65534);
    // An unknown user name is containerd's error.
    let mut f = Fixture::new();
    let mut config = image(&["/bin/sh"], &[]);
    config.set_user(Some("ghost".into()));
    f.image = Some(config);
    let err = f.build().unwrap_err();
    assert_eq!(err.reason(), "CreateContainerError");
    assert!(
        err.to_string()
            .ends_with("unable to find user ghost: no matching entries in passwd file")
    );
}

#[test]
fn namespaces_and_hostname() {
    let kinds = |spec: &Spec| -> Vec<(String, Option<PathBuf>)> {
        spec.linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .clone()
            .unwrap()
            .iter()
            .map(|n| (format!("{:?}", n.typ()), n.path().clone()))
            .collect()
    };
    let mut f = Fixture::new();
    f.namespaces = PodNamespaces {
        network: Namespace::Join("/run/netns/p".into()),
        ipc: Namespace::Join("/proc/10/ns/ipc".into()),
        uts: Namespace::Join("/proc/10/ns/uts".into()),
        pid: Namespace::Private,
    };
    let spec = f.build().unwrap();
    assert_eq!(
        kinds(&spec),
        [
            ("Mount".to_owned(), None),
            ("Network".to_owned(), Some("/run/netns/p".into())),
            ("Ipc".to_owned(), Some("/proc/10/ns/ipc".into())),
            ("Uts".to_owned(), Some("/proc/10/ns/uts".into())),
            ("Pid".to_owned(), None),
        ]
    );
    // A joined UTS namespace is named by the sandbox.
    assert_eq!(spec.hostname(), &None);

    f.namespaces = PodNamespaces {
        network: Namespace::Host,
        ipc: Namespace::Host,
        uts: Namespace::Host,
        pid: Namespace::Host,
    };
    f.host.cgroup_v2 = true;
    let spec = f.build().unwrap();
    assert_eq!(
        kinds(&spec),
        [("Mount".to_owned(), None), ("Cgroup".to_owned(), None)]
    );
    assert_eq!(spec.hostname(), &None);
}

#[test]
fn resources_and_oom_score() {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    let mut f = Fixture::new();
    let limits = std::collections::BTreeMap::from([
        ("cpu".to_owned(), Q("500m".into())),
        ("memory".to_owned(), Q("20Mi".into())),
    ]);
    f.container.resources = Some(ResourceRequirements {
        limits: Some(limits.clone()),
        requests: Some(limits),
        ..Default::default()
    });
    f.pod.spec.as_mut().unwrap().containers = vec![f.container.clone()];
    f.host.oom_score_adj_min = 0;
    let spec = f.build().unwrap();
    let r = spec.linux().as_ref().unwrap().resources().clone().unwrap();
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(20 << 20));
    assert_eq!(r.cpu().as_ref().unwrap().quota(), Some(50_000));
    // Guaranteed asks for -997; the runtime runs at 0 and cannot go lower.
    assert_eq!(spec.process().as_ref().unwrap().oom_score_adj(), Some(0));
    f.host.oom_score_adj_min = -1000;
    let spec = f.build().unwrap();
    assert_eq!(spec.process().as_ref().unwrap().oom_score_adj(), Some(-997));

    f.container.resources.as_mut().unwrap().limits = Some(std::collections::BTreeMap::from([(
        "memory".to_owned(),
        Q("lots".into()),
    )]));
    assert_eq!(
        f.build().unwrap_err().reason(),
        "CreateContainerConfigError"
    );
}

#[test]
fn exec_processes_follow_the_init_process() {
    let mut f = Fixture::new();
    f.env = vec![("TERM".into(), "dumb".into()), ("A".into(), "1".into())];
    f.container.working_dir = Some("/srv".into());
    let spec = f.build().unwrap();
    let init = spec.process().as_ref().unwrap();
    let plain = exec_process(init, strings(&["ls"]), false);
    assert_eq!(plain.args().clone().unwrap(), strings(&["ls"]));
    assert_eq!(plain.terminal(), Some(false));
    assert_eq!(plain.env(), init.env());
    assert_eq!(plain.cwd(), Path::new("/srv"));
    assert_eq!(plain.user(), init.user());
    let tty = exec_process(init, strings(&["sh"]), true);
    assert_eq!(tty.terminal(), Some(true));
    let env = tty.env().clone().unwrap();
    assert!(env.contains(&"TERM=xterm".to_owned()) && env.contains(&"A=1".to_owned()));
    assert!(!env.contains(&"TERM=dumb".to_owned()));
}
