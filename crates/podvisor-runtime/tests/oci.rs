//! The OCI building blocks with real runc, overlayfs and cgroups (root only): a busybox image
//! of two layers (the top one with a whiteout and an opaque directory) is mounted as an
//! overlay, a bundle is written with `build_spec`, and runc runs it as a child of this test
//! process, a child subreaper, with its output pumped into a CRI log file as the shim does.
//!
//! The executor is runc, or with `PODVISOR_OCI_EXECUTOR=youki` the embedded youki runtime
//! of the podvisor binary at `PODVISOR_BIN` (`podvisor youki`; `.ci/run` runs this file both
//! ways): the same scenarios, the same words.
//!
//! Self-contained (no `common` module): the runtime crate's tests are being regrouped.
//! The tests share the process (subreaper, `waitpid`): they take a lock and run one at a time.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{
    Capabilities, Container, Pod, PodSpec, ResourceRequirements, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use oci_spec::image::{Config as ImageConfig, ConfigBuilder};
use podvisor_runtime::cgroup::{self, ContainerCgroup};
use podvisor_runtime::logs::{SharedLogWriter, Stream, parse_line};
use podvisor_runtime::oci::executor::{ConsoleSocket, DirectRunner, OciExecutor, ProcessIo, Runc};
use podvisor_runtime::oci::rootfs::{self, RootfsKind, Strategy};
use podvisor_runtime::oci::spec::{
    HostFacts, Namespace, PodFiles, PodNamespaces, SpecInput, build_spec, exec_process,
};
use podvisor_runtime::oci::user::UserDb;

const NEEDS_ROOT: &str = "needs root: this test is #[ignore]d unless run as root with \
                          --include-ignored (it mounts overlays and runs runc)";

static SERIAL: Mutex<()> = Mutex::new(());

/// The podvisor binary whose `youki` mode is the executor under test, if it is youki.
fn youki_helper() -> Option<PathBuf> {
    (std::env::var("PODVISOR_OCI_EXECUTOR").as_deref() == Ok("youki")).then(|| {
        let bin = std::env::var_os("PODVISOR_BIN")
            .expect("PODVISOR_OCI_EXECUTOR=youki needs PODVISOR_BIN=<the podvisor binary>");
        PathBuf::from(bin)
    })
}

/// The executor under test over `state`: runc, or the embedded youki ([`youki_helper`]).
fn executor(state: &Path) -> Runc {
    match youki_helper() {
        Some(helper) => Runc::youki(&helper, state, DirectRunner),
        None => Runc::new(state),
    }
}

/// Root, the runtime and busybox present, one test at a time, and this process a subreaper.
fn guard() -> MutexGuard<'static, ()> {
    assert!(rustix::process::geteuid().is_root(), "{NEEDS_ROOT}");
    let runtime = youki_helper().unwrap_or_else(|| podvisor_runtime::oci::executor::RUNC.into());
    for tool in [runtime.as_path(), Path::new("/bin/busybox")] {
        assert!(
            tool.exists(),
            "{} is missing: run scripts/install-test-deps (apt-get install runc busybox-static)",
            tool.display()
        );
    }
    let lock = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).expect("subreaper");
    lock
}

const APPLETS: [&str; 15] = [
    "sh", "echo", "sleep", "cat", "id", "ls", "head", "tr", "touch", "grep", "test", "true",
    "unshare", "readlink", "hostname",
];

/// A scratch directory with the image's two layers.
struct Lab {
    dir: PathBuf,
    layers: Vec<PathBuf>,
    name: String,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let dir = std::env::temp_dir().join(format!("podvisor-oci-{name}-{}", std::process::id()));
        let _ = rootfs::remove_rootfs(&dir.join("ctr"));
        let _ = std::fs::remove_dir_all(&dir);
        let (bottom, top) = (dir.join("layers/0"), dir.join("layers/1"));
        for d in ["bin", "etc", "opaque", "tmp"] {
            std::fs::create_dir_all(bottom.join(d)).unwrap();
        }
        std::fs::set_permissions(
            bottom.join("tmp"),
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .unwrap();
        std::fs::copy("/bin/busybox", bottom.join("bin/busybox")).unwrap();
        for (i, applet) in APPLETS.iter().enumerate() {
            // Both kinds of link an image has: symbolic and hard.
            if i % 2 == 0 {
                std::os::unix::fs::symlink("busybox", bottom.join("bin").join(applet)).unwrap();
            } else {
                std::fs::hard_link(bottom.join("bin/busybox"), bottom.join("bin").join(applet))
                    .unwrap();
            }
        }
        std::fs::write(
            bottom.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n\
             nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        )
        .unwrap();
        std::fs::write(
            bottom.join("etc/group"),
            "root:x:0:\napp:x:1000:\nstaff:x:50:app\nnogroup:x:65534:\n",
        )
        .unwrap();
        std::fs::write(bottom.join("etc/gone"), "whited out above\n").unwrap();
        std::fs::write(
            bottom.join("opaque/below"),
            "hidden by the opaque directory\n",
        )
        .unwrap();
        // The top layer: a whiteout (0/0 character device), an opaque directory, a new file.
        std::fs::create_dir_all(top.join("etc")).unwrap();
        std::fs::create_dir_all(top.join("opaque")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            top.join("etc/gone").as_path(),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            rustix::fs::makedev(0, 0),
        )
        .unwrap();
        rustix::fs::setxattr(
            top.join("opaque").as_path(),
            "trusted.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        std::fs::write(top.join("opaque/above"), "from the top layer\n").unwrap();
        std::fs::write(top.join("etc/motd"), "top layer\n").unwrap();
        Lab {
            dir,
            layers: vec![bottom, top],
            name: name.to_owned(),
        }
    }

    fn ctr(&self) -> PathBuf {
        self.dir.join("ctr")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = rootfs::remove_rootfs(&self.ctr());
        let _ = std::fs::remove_dir_all(&self.dir);
        // runc removes a container's cgroups, not the parents it made for them.
        for dir in cgroup_dirs("podvisor-oci-test") {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `rel` in every cgroup hierarchy where it exists (each v1 controller, the v2 tree).
fn cgroup_dirs(rel: &str) -> Vec<PathBuf> {
    let mut roots = vec![PathBuf::from("/sys/fs/cgroup")];
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        roots.extend(entries.flatten().map(|e| e.path()));
    }
    roots
        .into_iter()
        .map(|r| r.join(rel))
        .filter(|d| d.join("cgroup.procs").exists())
        .collect()
}

fn pod(container: &Container) -> Pod {
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("oci-test".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container.clone()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container(command: &str, sc: Option<SecurityContext>) -> Container {
    Container {
        name: "app".into(),
        image: Some("busybox".into()),
        // No `command`: the image's entrypoint runs the script given as `args`.
        args: Some(vec![command.to_owned()]),
        security_context: sc,
        ..Default::default()
    }
}

fn image(user: Option<&str>) -> ImageConfig {
    let mut b = ConfigBuilder::default()
        .entrypoint(vec!["/bin/sh".to_owned(), "-c".to_owned()])
        .cmd(vec!["echo from CMD".to_owned()])
        .env(vec!["FROM_IMAGE=yes".to_owned()]);
    if let Some(user) = user {
        b = b.user(user.to_owned());
    }
    b.build().unwrap()
}

/// What a container run left.
#[derive(Debug)]
struct Outcome {
    exit_code: i32,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    oom_killed: bool,
}

/// A container whose root filesystem is mounted and whose bundle is written.
struct Prepared {
    id: String,
    runc: Runc,
    bundle: PathBuf,
    spec: oci_spec::runtime::Spec,
}

/// Mounts the rootfs as an overlay and writes the bundle (`build_spec`, the kubelet's
/// environment, the termination-message file at `<lab>/termination-log`).
fn prepare(lab: &Lab, pod: &Pod, container: &Container, image: &ImageConfig) -> Prepared {
    prepare_in(lab, pod, container, image, &PodNamespaces::default())
}

/// [`prepare`], joining `namespaces`.
fn prepare_in(
    lab: &Lab,
    pod: &Pod,
    container: &Container,
    image: &ImageConfig,
    namespaces: &PodNamespaces,
) -> Prepared {
    let rootfs = rootfs::mount_rootfs(&lab.ctr(), &lab.layers, Strategy::Overlay).unwrap();
    assert_eq!(rootfs.kind, RootfsKind::Overlay);
    assert!(rootfs::is_mount_point(&rootfs.path).unwrap());
    let id = format!("podvisor-test-{}-{}", lab.name, std::process::id());
    let bundle = lab.dir.join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let tm = lab.dir.join("termination-log");
    std::fs::write(&tm, "").unwrap();
    let env =
        podvisor_runtime::config::kubelet_environment(pod, container, &Default::default()).unwrap();
    let spec = build_spec(&SpecInput {
        pod,
        container,
        container_id: &id,
        image: Some(image),
        rootfs: &rootfs.path,
        users: &UserDb::read(&rootfs.path).unwrap(),
        env: &env,
        mounts: &[],
        pod_files: &PodFiles {
            termination_message: Some(tm),
            ..PodFiles::default()
        },
        namespaces,
        cgroups_path: &format!("/podvisor-oci-test/{id}"),
        hostname: "web",
        seccomp_localhost: None,
        host: &HostFacts::detect().unwrap(),
    })
    .unwrap();
    let mut spec = spec;
    if youki_helper().is_some() {
        // As the shim does for the embedded youki: `/sys/fs/cgroup` laid out beside the root
        // filesystem, one bind in the spec (teardown checks it is all gone).
        let view = podvisor_runtime::oci::spec::cgroup_mount::view_dir(&lab.ctr());
        podvisor_runtime::oci::spec::cgroup_mount::rewrite_prepared(&mut spec, &view).unwrap();
    }
    spec.save(bundle.join("config.json")).unwrap();
    Prepared {
        id,
        runc: executor(&lab.dir.join("state")),
        bundle,
        spec,
    }
}

/// Deletes the (stopped, reaped) container as the shim does after its exit
/// ([`OciExecutor::delete_exited`]: youki's in this process, runc's by `runc delete`) and its
/// root filesystem, and checks that nothing is left: no mount, no container directory, no
/// runtime state, no cgroup in any hierarchy, no runtime log.
fn teardown(lab: &Lab, prepared: &Prepared) {
    remove(lab, prepared, true);
}

/// [`teardown`] after a create that failed: `delete --force`, as the shim does then.
fn teardown_failed_create(lab: &Lab, prepared: &Prepared) {
    remove(lab, prepared, false);
}

fn remove(lab: &Lab, prepared: &Prepared, exited: bool) {
    let Prepared { id, runc, .. } = prepared;
    podvisor_runtime::oci::spec::cgroup_mount::remove_view(
        &podvisor_runtime::oci::spec::cgroup_mount::view_dir(&lab.ctr()),
    );
    if exited {
        runc.delete_exited(id, &format!("/podvisor-oci-test/{id}"))
            .unwrap();
    } else {
        runc.delete(id, true).unwrap();
    }
    rootfs::remove_rootfs(&lab.ctr()).unwrap();
    assert!(!lab.ctr().exists(), "{} left", lab.ctr().display());
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(lab.dir.to_str().unwrap()),
        "a mount is left"
    );
    assert_eq!(runc.state(id).unwrap(), None);
    assert!(!runc.root().join(id).exists());
    assert!(ContainerCgroup::open(&cgroup::detect(), "podvisor-oci-test", id).is_err());
    assert_eq!(
        cgroup_dirs(&format!("podvisor-oci-test/{id}")),
        Vec::<PathBuf>::new()
    );
    assert_eq!(std::fs::read_dir(runc.log_dir()).unwrap().count(), 0);
}

/// Runs the container to its end with runc, as the shim would: created with its output on
/// pipes pumped into a CRI log file, started, reaped, its OOM counter read; then
/// [`teardown`].
fn run(lab: &Lab, pod: &Pod, container: &Container, image: &ImageConfig) -> Outcome {
    run_in(lab, pod, container, image, &PodNamespaces::default())
}

/// [`run`], joining `namespaces`.
fn run_in(
    lab: &Lab,
    pod: &Pod,
    container: &Container,
    image: &ImageConfig,
    namespaces: &PodNamespaces,
) -> Outcome {
    let prepared = prepare_in(lab, pod, container, image, namespaces);
    let Prepared {
        id, runc, bundle, ..
    } = &prepared;
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (err_r, err_w) = std::io::pipe().unwrap();
    let pid = runc
        .create(
            bundle,
            id,
            &lab.dir.join("pid"),
            ProcessIo::Fds {
                stdin: None,
                stdout: Some(OwnedFd::from(out_w)),
                stderr: Some(OwnedFd::from(err_w)),
            },
        )
        .unwrap_or_else(|e| panic!("{}", e.kubelet_message("")));
    // runc create is gone: the container's init process is our child now.
    assert_eq!(parent_of(pid), rustix::process::getpid().as_raw_pid());
    let log = lab.dir.join("0.log");
    let writer = SharedLogWriter::create(&log).unwrap();
    let pumps: Vec<_> = [(out_r, Stream::Stdout), (err_r, Stream::Stderr)]
        .into_iter()
        .map(|(r, stream)| {
            let writer = writer.clone();
            std::thread::spawn(move || writer.pump(stream, r).unwrap())
        })
        .collect();
    runc.start(id).unwrap();
    let (exit_code, signal) = wait(pid);
    for p in pumps {
        p.join().unwrap();
    }
    // What the shim does on exit: the OOM counter of the container's cgroup.
    let cg = ContainerCgroup::open(&cgroup::detect(), "podvisor-oci-test", id).unwrap();
    let oom_killed = cg.oom_kill_count() > 0;
    assert_eq!(
        runc.state(id).unwrap().map(|s| s.status),
        Some(podvisor_runtime::oci::executor::Status::Stopped)
    );
    teardown(lab, &prepared);

    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for line in text.lines() {
        let line = parse_line(line).unwrap();
        let out = if line.stream == Stream::Stdout {
            &mut stdout
        } else {
            &mut stderr
        };
        out.push_str(&line.content);
        out.push('\n');
    }
    Outcome {
        exit_code,
        signal,
        stdout,
        stderr,
        oom_killed,
    }
}

fn parent_of(pid: u32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Reaps `pid`: `(exit code, signal)`, 128 + n for signal n as the shim reports it.
fn wait(pid: u32) -> (i32, Option<i32>) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let status = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
        .unwrap()
        .unwrap()
        .1;
    // Orphans of the container (re-parented to us as well) are reaped too.
    while let Ok(Some(_)) = rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG) {}
    match status.terminating_signal() {
        Some(sig) => (128 + sig, Some(sig)),
        None => (status.exit_status().unwrap(), None),
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn runs_an_image_with_runc_under_the_subreaper() {
    let _g = guard();
    let lab = Lab::new("basic");
    let script = "echo hello; echo oops >&2; \
                  test ! -e /etc/gone && echo whiteout-ok; \
                  ls /opaque; cat /etc/motd; echo \"image env $FROM_IMAGE\"; \
                  echo \"host $HOSTNAME\"; exit 3";
    let sc = SecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    };
    let c = container(script, Some(sc));
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_eq!((out.exit_code, out.signal), (3, None), "{out:?}");
    assert_eq!(
        out.stdout, "hello\nwhiteout-ok\nabove\ntop layer\nimage env yes\nhost web\n",
        "{out:?}"
    );
    assert_eq!(out.stderr, "oops\n");
    assert!(!out.oom_killed);

    // No command or args: ENTRYPOINT + CMD.
    let mut c = container("", None);
    c.args = None;
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_eq!((out.exit_code, out.stdout.as_str()), (0, "from CMD\n"));
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn image_user_and_run_as_user() {
    let _g = guard();
    let lab = Lab::new("user");
    // Image USER, runAsUser, runAsGroup → `id -u` and `id -G`.
    type Case<'a> = (Option<&'a str>, Option<i64>, Option<i64>, &'a str);
    let cases: [Case; 4] = [
        (None, None, None, "0 0"),
        // A name resolved in the image's /etc/passwd, its /etc/group membership added.
        (Some("app"), None, None, "1000 1000 50"),
        (Some("app"), Some(65534), None, "65534 65534"),
        (Some("4242"), None, Some(7), "4242 7"),
    ];
    for (user, run_as_user, run_as_group, want) in cases {
        let sc = SecurityContext {
            run_as_user,
            run_as_group,
            ..Default::default()
        };
        let c = container("echo $(id -u) $(id -G)", Some(sc));
        let out = run(&lab, &pod(&c), &c, &image(user));
        assert_eq!(out.exit_code, 0, "{out:?}");
        assert_eq!(
            out.stdout.trim(),
            want,
            "image user {user:?}, runAsUser {run_as_user:?}"
        );
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn read_only_root_filesystem() {
    let _g = guard();
    let lab = Lab::new("rofs");
    let sc = |ro| SecurityContext {
        read_only_root_filesystem: Some(ro),
        ..Default::default()
    };
    let c = container("touch /x && echo wrote", Some(sc(true)));
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_ne!(out.exit_code, 0, "{out:?}");
    assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    // The termination-message file stays writable.
    let c = container(
        "echo bye > /dev/termination-log && touch /x && echo wrote",
        Some(sc(false)),
    );
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (0, "wrote\n"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(lab.dir.join("termination-log")).unwrap(),
        "bye\n"
    );
}

/// The container's process has only its standard I/O: a descriptor the runtime inherited
/// without close-on-exec (here a pipe this test leaves open on purpose) is closed by the
/// runtime's init before the container's program runs (ARCHITECTURE.md's invariant).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn the_container_inherits_only_descriptors_0_to_2() {
    let _g = guard();
    let lab = Lab::new("fds");
    // Inheritable on purpose: the runtime's process gets it across its exec.
    let (leak_r, leak_w) = rustix::pipe::pipe().unwrap();
    let c = container("ls /proc/self/fd", None);
    let out = run(&lab, &pod(&c), &c, &image(None));
    drop((leak_r, leak_w));
    // 3 is `ls`'s own handle on the directory it lists.
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (0, "0\n1\n2\n3\n"),
        "{out:?}"
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn dropped_capabilities_are_gone() {
    let _g = guard();
    let lab = Lab::new("caps");
    let sc = SecurityContext {
        capabilities: Some(Capabilities {
            add: Some(vec!["NET_ADMIN".into()]),
            drop: Some(vec!["CHOWN".into(), "NET_RAW".into()]),
        }),
        ..Default::default()
    };
    let c = container("grep CapEff /proc/self/status", Some(sc));
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_eq!(out.exit_code, 0, "{out:?}");
    let hex = out.stdout.trim().trim_start_matches("CapEff:").trim();
    let mask = u64::from_str_radix(hex, 16).unwrap();
    let has = |bit: u32| mask & (1 << bit) != 0;
    // CHOWN 0, NET_RAW 13 dropped; NET_ADMIN 12 added; KILL 5 and SETUID 7 kept; no SYS_ADMIN 21.
    assert!(!has(0) && !has(13), "{hex}");
    assert!(has(12) && has(5) && has(7), "{hex}");
    assert!(!has(21), "{hex}");
    assert_eq!(mask.count_ones(), 13, "{hex}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn memory_limit_ends_in_an_oom_kill() {
    let _g = guard();
    let lab = Lab::new("oom");
    let mut c = container(
        "x=$(head -c 67108864 /dev/zero | tr '\\000' a); echo survived",
        None,
    );
    let limits = BTreeMap::from([("memory".to_owned(), Quantity("20Mi".into()))]);
    c.resources = Some(ResourceRequirements {
        limits: Some(limits.clone()),
        requests: Some(limits),
        ..Default::default()
    });
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert!(out.oom_killed, "{out:?}");
    assert_eq!((out.exit_code, out.signal), (137, Some(9)), "{out:?}");
    assert!(!out.stdout.contains("survived"));
}

/// In-place resize of a runc container (the `oci` class): the cgroup writes of
/// `UpdateContainerResources` change its cpu quota and shares and its memory limit while it
/// runs (the files runc made from `linux.resources`, as `runc update` would write them).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn resize_updates_a_running_containers_cgroups() {
    use podvisor_runtime::cgroup::resize::{CgroupResources, update};
    let _g = guard();
    let lab = Lab::new("resize");
    let mut c = container("echo ready; exec sleep 60", None);
    let q = |v: &str| Quantity(v.into());
    c.resources = Some(ResourceRequirements {
        limits: Some(BTreeMap::from([
            ("cpu".to_owned(), q("500m")),
            ("memory".to_owned(), q("64Mi")),
        ])),
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), q("250m")),
            ("memory".to_owned(), q("64Mi")),
        ])),
        ..Default::default()
    });
    let prepared = prepare(&lab, &pod(&c), &c, &image(None));
    let Prepared {
        id, runc, bundle, ..
    } = &prepared;
    let pid = runc
        .create(bundle, id, &lab.dir.join("pid"), ProcessIo::null())
        .unwrap();
    runc.start(id).unwrap();
    let read = |controller: &str, file: &str| {
        std::fs::read_to_string(format!(
            "/sys/fs/cgroup/{controller}/podvisor-oci-test/{id}/{file}"
        ))
        .unwrap()
        .trim()
        .to_owned()
    };
    assert_eq!(read("cpu", "cpu.cfs_quota_us"), "50000");
    assert_eq!(read("cpu", "cpu.shares"), "256");
    assert_eq!(
        read("memory", "memory.limit_in_bytes"),
        (64u64 << 20).to_string()
    );
    let mode = cgroup::detect();
    update(
        &mode,
        "podvisor-oci-test",
        id,
        &CgroupResources {
            memory_limit: Some(96 << 20),
            cpu_shares: 1024,
            cpu_quota: Some(150_000),
            cpu_period: 100_000,
        },
    )
    .unwrap();
    assert_eq!(read("cpu", "cpu.cfs_quota_us"), "150000");
    assert_eq!(read("cpu", "cpu.shares"), "1024");
    assert_eq!(
        read("memory", "memory.limit_in_bytes"),
        (96u64 << 20).to_string()
    );
    // No cpu limit any more: no quota.
    update(
        &mode,
        "podvisor-oci-test",
        id,
        &CgroupResources {
            memory_limit: Some(96 << 20),
            cpu_shares: 1024,
            cpu_quota: None,
            cpu_period: 100_000,
        },
    )
    .unwrap();
    assert_eq!(read("cpu", "cpu.cfs_quota_us"), "-1");
    // It ran throughout.
    assert_eq!(
        runc.state(id).unwrap().map(|s| (s.status, s.pid)),
        Some((podvisor_runtime::oci::executor::Status::Running, pid))
    );
    runc.kill(id, 9, true).unwrap();
    assert_eq!(wait(pid), (137, Some(9)));
    teardown(&lab, &prepared);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn exec_and_kill_in_a_running_container() {
    let _g = guard();
    let lab = Lab::new("exec");
    let c = container("echo ready; exec sleep 60", None);
    let prepared = prepare(&lab, &pod(&c), &c, &image(Some("app")));
    let Prepared {
        id,
        runc,
        bundle,
        spec,
    } = &prepared;
    let pid = runc
        .create(bundle, id, &lab.dir.join("pid"), ProcessIo::null())
        .unwrap();
    runc.start(id).unwrap();
    assert_eq!(
        runc.state(id).unwrap().map(|s| (s.status, s.pid)),
        Some((podvisor_runtime::oci::executor::Status::Running, pid))
    );
    // An exec runs as the container's user, in its root, and is our child too.
    let process = exec_process(
        spec.process().as_ref().unwrap(),
        vec!["/bin/sh".into(), "-c".into(), "id -u; ls /opaque".into()],
        false,
    );
    let (out_r, out_w) = std::io::pipe().unwrap();
    let exec_pid = runc
        .exec(
            id,
            &process,
            &lab.dir.join("exec.pid"),
            ProcessIo::Fds {
                stdin: None,
                stdout: Some(OwnedFd::from(out_w)),
                stderr: None,
            },
        )
        .unwrap();
    assert_eq!(parent_of(exec_pid), rustix::process::getpid().as_raw_pid());
    assert_eq!(wait(exec_pid), (0, None));
    let output = std::io::read_to_string(out_r).unwrap();
    assert_eq!(output, "1000\nabove\n");
    // A command that cannot start is runc's error, worded as containerd's.
    let process = exec_process(
        spec.process().as_ref().unwrap(),
        vec!["/no/such/binary".into()],
        false,
    );
    let err = runc
        .exec(id, &process, &lab.dir.join("exec2.pid"), ProcessIo::null())
        .unwrap_err();
    let message = err.kubelet_message("e2");
    assert!(
        message.starts_with(
            "failed to exec in container: failed to start exec \"e2\": OCI runtime exec failed: "
        ) && message.contains("/no/such/binary"),
        "{message}"
    );
    runc.kill(id, 9, true).unwrap();
    assert_eq!(wait(pid), (137, Some(9)));
    teardown(&lab, &prepared);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn create_failures_carry_runc_words() {
    let _g = guard();
    let lab = Lab::new("fail");
    let mut c = container("", None);
    c.command = Some(vec!["/no/such/binary".into()]);
    let prepared = prepare(&lab, &pod(&c), &c, &image(None));
    let Prepared {
        id, runc, bundle, ..
    } = &prepared;
    let (err_r, err_w) = std::io::pipe().unwrap();
    let err = runc
        .create(
            bundle,
            id,
            &lab.dir.join("pid"),
            ProcessIo::Fds {
                stdin: None,
                stdout: None,
                stderr: Some(OwnedFd::from(err_w)),
            },
        )
        .unwrap_err();
    assert_eq!(
        err.kubelet_message(""),
        "failed to create containerd task: failed to create shim task: OCI runtime create \
         failed: runc create failed: unable to start container process: exec: \
         \"/no/such/binary\": stat /no/such/binary: no such file or directory: unknown"
    );
    // runc's own complaint also reached the container's stderr: the caller drops it.
    let stray = std::io::read_to_string(err_r).unwrap();
    assert!(stray.contains("/no/such/binary"), "{stray:?}");
    teardown_failed_create(&lab, &prepared);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn terminal_through_the_console_socket() {
    let _g = guard();
    let lab = Lab::new("tty");
    let mut c = container(
        "test -t 0 && test -t 1 && echo tty-ok; echo TERM=$TERM",
        None,
    );
    c.tty = Some(true);
    c.stdin = Some(true);
    let prepared = prepare(&lab, &pod(&c), &c, &image(None));
    let Prepared {
        id, runc, bundle, ..
    } = &prepared;
    let socket = ConsoleSocket::bind(&lab.dir.join("console.sock")).unwrap();
    let pid = runc
        .create(
            bundle,
            id,
            &lab.dir.join("pid"),
            ProcessIo::Terminal {
                console_socket: socket.path().to_owned(),
            },
        )
        .unwrap();
    let master = socket.receive().unwrap();
    runc.start(id).unwrap();
    let mut output = Vec::new();
    let mut master = std::fs::File::from(master);
    // The master reads EIO once the terminal's last holder exited.
    let _ = std::io::Read::read_to_end(&mut master, &mut output);
    assert_eq!(wait(pid), (0, None));
    let output = String::from_utf8_lossy(&output);
    assert!(output.contains("tty-ok\r\n"), "{output:?}");
    teardown(&lab, &prepared);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn runtime_default_seccomp_denies_by_capability() {
    let _g = guard();
    let lab = Lab::new("seccomp");
    let profile = |t: &str| SecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: t.into(),
            localhost_profile: None,
        }),
        ..Default::default()
    };
    // A user namespace needs no capability, so only the filter stops `unshare`.
    let script = "unshare -U true && echo allowed || echo denied";
    for (sc, want) in [
        (profile("Unconfined"), "allowed\n"),
        (profile("RuntimeDefault"), "denied\n"),
    ] {
        let c = container(script, Some(sc.clone()));
        let out = run(&lab, &pod(&c), &c, &image(None));
        assert_eq!(out.stdout, want, "{sc:?}: {out:?}");
    }
    // With CAP_SYS_ADMIN the profile lets namespaces through, as containerd's does.
    let mut sc = profile("RuntimeDefault");
    sc.capabilities = Some(Capabilities {
        add: Some(vec!["SYS_ADMIN".into()]),
        drop: None,
    });
    let c = container(script, Some(sc));
    let out = run(&lab, &pod(&c), &c, &image(None));
    assert_eq!(out.stdout, "allowed\n", "{out:?}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn copy_fallback_applies_whiteouts() {
    let _g = guard();
    let lab = Lab::new("copy");
    // File capabilities (VFS_CAP_REVISION_2: effective, CAP_NET_RAW permitted) are kept.
    let fcaps: [u8; 20] = [
        1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let ping = lab.layers[0].join("bin/ping");
    std::fs::write(&ping, "#!/bin/sh\n").unwrap();
    rustix::fs::setxattr(
        ping.as_path(),
        "security.capability",
        &fcaps,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let ctr = lab.ctr();
    let rootfs = rootfs::mount_rootfs(&ctr, &lab.layers, Strategy::Copy).unwrap();
    assert_eq!(rootfs.kind, RootfsKind::Copy);
    assert!(!rootfs::is_mount_point(&rootfs.path).unwrap());
    let p = &rootfs.path;
    assert!(!p.join("etc/gone").exists());
    assert!(p.join("etc/motd").exists());
    assert!(!p.join("opaque/below").exists());
    assert!(p.join("opaque/above").exists());
    assert_eq!(
        std::fs::read_link(p.join("bin/sh")).unwrap(),
        PathBuf::from("busybox")
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(p.join("tmp")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o7777, 0o1777);
    let mut copied = [0_u8; 64];
    let len = rustix::fs::getxattr(
        p.join("bin/ping").as_path(),
        "security.capability",
        &mut copied,
    )
    .unwrap();
    assert_eq!(&copied[..len], &fcaps);
    rootfs::remove_rootfs(&ctr).unwrap();
    assert!(!ctr.exists());
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn sub_path_sources_stay_inside_their_volume() {
    let _g = guard();
    let lab = Lab::new("subpath");
    let volume = lab.dir.join("volume");
    std::fs::create_dir_all(volume.join("data")).unwrap();
    std::fs::write(volume.join("data/file"), "inside\n").unwrap();
    std::fs::write(lab.dir.join("secret"), "outside\n").unwrap();
    std::os::unix::fs::symlink(lab.dir.join("secret"), volume.join("escape")).unwrap();
    std::os::unix::fs::symlink("../..", volume.join("up")).unwrap();
    let ctr = lab.ctr();
    let dir_source = rootfs::prepare_sub_path(&ctr, 0, &volume, Path::new("data")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir_source.join("file")).unwrap(),
        "inside\n"
    );
    let file_source = rootfs::prepare_sub_path(&ctr, 1, &volume, Path::new("data/file")).unwrap();
    assert_eq!(std::fs::read_to_string(&file_source).unwrap(), "inside\n");
    // Missing directories are made inside the volume.
    let made = rootfs::prepare_sub_path(&ctr, 2, &volume, Path::new("new/deeper")).unwrap();
    assert!(volume.join("new/deeper").is_dir() && made.is_dir());
    // Mounting the root filesystem afterwards keeps the prepared sources.
    rootfs::mount_rootfs(&ctr, &lab.layers, Strategy::Overlay).unwrap();
    assert!(rootfs::is_mount_point(&dir_source).unwrap());
    for escape in ["escape", "up/secret", "up"] {
        let err = rootfs::prepare_sub_path(&ctr, 3, &volume, Path::new(escape)).unwrap_err();
        assert!(
            err.to_string().contains("resolving subPath"),
            "{escape}: {err}"
        );
    }
    rootfs::remove_rootfs(&ctr).unwrap();
    assert!(!ctr.exists());
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mountinfo.contains(lab.dir.to_str().unwrap()));
    assert_eq!(
        std::fs::read_to_string(volume.join("data/file")).unwrap(),
        "inside\n"
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn joins_the_pod_namespaces_by_path() {
    let _g = guard();
    let lab = Lab::new("netns");
    // The pod's network namespace as a bind-mounted file, its UTS and IPC namespaces held
    // by a process (named `podns` there).
    let netns = format!("podvisor-oci-test-{}", std::process::id());
    let ip = |args: &[&str]| {
        let status = std::process::Command::new("ip")
            .args(args)
            .status()
            .expect("running ip (iproute2; scripts/install-test-deps installs it)");
        assert!(status.success(), "ip {args:?}");
    };
    ip(&["netns", "add", &netns]);
    let mut holder = std::process::Command::new("unshare")
        .args([
            "--uts",
            "--ipc",
            "sh",
            "-c",
            "hostname podns && exec sleep 60",
        ])
        .spawn()
        .expect("running unshare (util-linux)");
    let ns = |kind: &str| PathBuf::from(format!("/proc/{}/ns/{kind}", holder.id()));
    let link = |p: &Path| std::fs::read_link(p).unwrap().display().to_string();
    // Wait until the holder named its namespace.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while link(&ns("uts")) == link(Path::new("/proc/self/ns/uts"))
        || std::fs::read_to_string(format!("/proc/{}/comm", holder.id())).unwrap() != "sleep\n"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let netns_path = PathBuf::from(format!("/run/netns/{netns}"));
    let namespaces = PodNamespaces {
        network: Namespace::Join(netns_path.clone()),
        ipc: Namespace::Join(ns("ipc")),
        uts: Namespace::Join(ns("uts")),
        pid: Namespace::Private,
    };
    let c = container(
        "for n in net uts ipc; do readlink /proc/self/ns/$n; done; hostname",
        None,
    );
    let out = run_in(&lab, &pod(&c), &c, &image(None), &namespaces);
    let net_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&netns_path).unwrap());
    let want = format!(
        "net:[{net_inode}]\n{}\n{}\npodns\n",
        link(&ns("uts")),
        link(&ns("ipc"))
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    ip(&["netns", "delete", &netns]);
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(out.stdout, want);
}

/// A container that joins a pod's PID namespace (`shareProcessNamespace`, a debug container's
/// target) where its pid is far from 1 (the namespace's last pid set to 31000, a pid no host
/// process has): it starts, and its `/sys/fs/cgroup` is its own cgroup, read-only, with the
/// memory limit it was given, under every executor (youki 0.7 looked its pid up in the host's
/// `/proc` and failed with "failed to prepare rootfs").
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn joins_a_pid_namespace_at_a_high_pid_and_sees_its_own_cgroup() {
    let _g = guard();
    let lab = Lab::new("pidns");
    let mut holder = std::process::Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            "echo 31000 > /proc/sys/kernel/ns_last_pid && exec sleep 60",
        ])
        .spawn()
        .expect("running unshare (util-linux)");
    // The namespace is the one of unshare's child (the `sleep`).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let sleeper = loop {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", holder.id()))
            .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next()
            && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "sleep\n")
        {
            break pid.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the holder did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let namespaces = PodNamespaces {
        pid: Namespace::Join(PathBuf::from(format!("/proc/{sleeper}/ns/pid"))),
        ..PodNamespaces::default()
    };
    let mut c = container(
        // `$$$$`: the kubelet's `$(VAR)` expansion makes it `$$`.
        "echo $$$$; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; \
         (echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes) 2>/dev/null || echo read-only; \
         mkdir /sys/fs/cgroup/x && echo tmpfs-writable; \
         ls /sys/fs/cgroup/memory/cgroup.procs",
        None,
    );
    let limits = BTreeMap::from([("memory".to_owned(), Quantity("64Mi".into()))]);
    c.resources = Some(ResourceRequirements {
        limits: Some(limits.clone()),
        requests: Some(limits),
        ..Default::default()
    });
    let out = run_in(&lab, &pod(&c), &c, &image(None), &namespaces);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.first().and_then(|p| p.parse::<u32>().ok()) > Some(31000),
        "{out:?}"
    );
    assert_eq!(
        lines[1..],
        [
            "67108864",
            "read-only",
            "tmpfs-writable",
            "/sys/fs/cgroup/memory/cgroup.procs"
        ],
        "{out:?}"
    );
}

/// `runc run --detach` ([`RuncMode::Run`]): one runc process creates and starts the
/// container; `registered` gets the init pid once runc returned, the process is this
/// subreaper's child (re-parented when runc exited, even if it had exited already) and its
/// exit code and output arrive as with `create` + `start`. A failure is worded as the
/// kubelet shows containerd's create failure (`RunContainerError`'s message), runc's
/// "runc run failed" included.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn run_mode_creates_and_starts_in_one_runc() {
    use podvisor_runtime::oci::executor::RuncMode;
    let _g = guard();
    let lab = Lab::new("runmode");
    let c = container("echo one-step; exit 7", None);
    let prepared = prepare(&lab, &pod(&c), &c, &image(None));
    let runc = executor(&lab.dir.join("state")).with_mode(RuncMode::Run);
    let (out_r, out_w) = std::io::pipe().unwrap();
    let mut registered = Vec::new();
    let pid = runc
        .run(
            &prepared.bundle,
            &prepared.id,
            &lab.dir.join("pid"),
            ProcessIo::Fds {
                stdin: None,
                stdout: Some(OwnedFd::from(out_w)),
                stderr: None,
            },
            &mut |pid| registered.push(pid),
        )
        .unwrap_or_else(|e| panic!("{}", e.kubelet_message("")));
    assert_eq!(registered, [pid]);
    assert_eq!(parent_of(pid), rustix::process::getpid().as_raw_pid());
    assert_eq!(wait(pid), (7, None));
    assert_eq!(std::io::read_to_string(out_r).unwrap(), "one-step\n");
    teardown(&lab, &prepared);

    let mut c = container("", None);
    c.command = Some(vec!["/no/such/binary".into()]);
    let prepared = prepare(&lab, &pod(&c), &c, &image(None));
    let mut registered = Vec::new();
    let err = runc
        .run(
            &prepared.bundle,
            &prepared.id,
            &lab.dir.join("pid"),
            ProcessIo::null(),
            &mut |pid| registered.push(pid),
        )
        .unwrap_err();
    assert!(registered.is_empty(), "{registered:?}");
    assert_eq!(
        err.kubelet_message(""),
        "failed to create containerd task: failed to create shim task: OCI runtime create \
         failed: runc create failed: unable to start container process: exec: \
         \"/no/such/binary\": stat /no/such/binary: no such file or directory: unknown"
    );
    teardown_failed_create(&lab, &prepared);
}
