//! A real registry for pull tests: Debian's `docker-registry` (distribution v2) on 127.0.0.1,
//! started by the test and stopped on drop, with images pushed by `skopeo`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DOCKER_REGISTRY: &str = "/usr/bin/docker-registry";
const SKOPEO: &str = "/usr/bin/skopeo";

/// A `docker-registry` on a free port of 127.0.0.1, storing under a directory of the test's.
pub struct Registry {
    child: Child,
    /// Its port.
    pub port: u16,
    root: PathBuf,
}

impl Registry {
    /// Starts the registry with its storage and configuration under `root` (made if missing);
    /// `htpasswd` (`user:bcrypt-hash`) turns on basic auth. Returns once it accepts
    /// connections.
    ///
    /// # Panics
    ///
    /// When `docker-registry` is not installed or does not listen within 10 s.
    #[must_use]
    pub fn start(root: &Path, htpasswd: Option<&str>) -> Registry {
        assert!(
            Path::new(DOCKER_REGISTRY).exists(),
            "Debian's docker-registry is required ({DOCKER_REGISTRY}): scripts/install-test-deps"
        );
        std::fs::create_dir_all(root).unwrap();
        // A port picked here may be taken by another process before the registry binds it,
        // and a loaded machine may be slow to start it: a registry that exits is started
        // again on another port, one that is slow is waited for (its stderr tells why not).
        let mut attempt = 0;
        let (child, port) = loop {
            attempt += 1;
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut config = format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                root.join("data").display()
            );
            if let Some(line) = htpasswd {
                let path = root.join("htpasswd");
                std::fs::write(&path, format!("{line}\n")).unwrap();
                config.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: podvisor-test\n    path: {}\n",
                    path.display()
                ));
            }
            let config_path = root.join("config.yml");
            std::fs::write(&config_path, config).unwrap();
            let stderr_path = root.join("registry.stderr");
            let mut child = Command::new(DOCKER_REGISTRY)
                .arg("serve")
                .arg(&config_path)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&stderr_path).unwrap())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let exited = loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    break None;
                }
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "docker-registry did not listen on {port} within 30 s: {}",
                        std::fs::read_to_string(&stderr_path).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            match exited {
                None => break (child, port),
                Some(status) if attempt < 3 => {
                    eprintln!(
                        "docker-registry on {port} exited with {status}, starting it again: {}",
                        std::fs::read_to_string(&stderr_path).unwrap_or_default()
                    );
                }
                Some(status) => panic!(
                    "docker-registry on {port} exited with {status}: {}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                ),
            }
        };
        Registry {
            child,
            port,
            root: root.to_owned(),
        }
    }

    /// The registry's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:PORT`.
    #[must_use]
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `skopeo copy EXTRA… oci:LAYOUT docker://127.0.0.1:PORT/NAME`, with `creds`
    /// (`user`, `password`) for a registry with basic auth.
    ///
    /// # Panics
    ///
    /// When skopeo is missing or the copy fails.
    pub fn push(&self, layout: &Path, name: &str, extra: &[&str], creds: Option<(&str, &str)>) {
        assert!(
            Path::new(SKOPEO).exists(),
            "skopeo is required ({SKOPEO}): scripts/install-test-deps"
        );
        let mut cmd = Command::new(SKOPEO);
        cmd.args(["--insecure-policy", "copy", "-q", "--dest-tls-verify=false"]);
        cmd.args(extra);
        if let Some((u, p)) = creds {
            cmd.arg(format!("--dest-creds={u}:{p}"));
        }
        let out = cmd
            .arg(format!("oci:{}", layout.display()))
            .arg(format!("docker://{}/{name}", self.host()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "skopeo copy failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Where the registry keeps a blob (`sha256:…`), to corrupt it.
    #[must_use]
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = &digest[7..];
        self.root
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
