//! Who a container's process runs as: the user string the kubelet and containerd agree on,
//! resolved through the image's own `/etc/passwd` and `/etc/group`.
//!
//! The chain, as upstream runs it:
//! 1. the runtime reports the image's user to the kubelet without its group
//!    (containerd's `getUserFromImage`: `User` split at `:`, a number is a uid, anything else
//!    a name; no `User` is uid 0 for the kubelet's `getImageUser`);
//! 2. the kubelet checks `runAsNonRoot` against it ([`verify_run_as_non_root`]) and passes
//!    `runAsUser` (else the image's uid or name) and `runAsGroup` to the runtime;
//! 3. containerd makes `user[:group]` of them (`generateUserString`) and resolves it in the
//!    container's root (`WithUser`): a numeric uid is looked up for its primary group (0 when
//!    the image has no entry), a name must exist, a group name must exist;
//! 4. the supplementary groups are the primary gid, the groups of `/etc/group` that list the
//!    user (`supplementalGroupsPolicy: Merge`, the default; none with `Strict`), the pod's
//!    `fsGroup` and `supplementalGroups`.
//!
//! So, as with the kubelet and containerd, an image `User` of `1000:50` runs with uid 1000 and
//! the primary group of uid 1000 in the image's `/etc/passwd` (or 0), not with gid 50.
//!
//! [`UserDb::read`] reads the two files from a root filesystem without following any symbolic
//! link out of it (`openat2` with `RESOLVE_IN_ROOT`); everything else here is pure.

use std::io::{self, Read};
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

pub use crate::config::security::verify_run_as_non_root;
use crate::config::security::{effective_run_as, pod_supplemental_groups};

/// The largest file read from an image's `/etc` (a bigger one is refused, not truncated).
const MAX_DB_BYTES: u64 = 4 << 20;

/// The text of an image's `/etc/passwd` and `/etc/group`, `None` where the file is missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserDb {
    /// `/etc/passwd`.
    pub passwd: Option<String>,
    /// `/etc/group`.
    pub group: Option<String>,
}

/// One `/etc/passwd` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PasswdEntry<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
}

/// One `/etc/group` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupEntry<'a> {
    name: &'a str,
    gid: u32,
    members: Vec<&'a str>,
}

impl UserDb {
    /// Reads `etc/passwd` and `etc/group` of the root filesystem at `rootfs`, resolving every
    /// component (symbolic links included) inside it: an image whose `/etc/passwd` links to
    /// `/../../host/etc/shadow` reads its own `/host/etc/shadow` or nothing. A missing file
    /// is `None`; anything but a regular file is an error.
    pub fn read(rootfs: &Path) -> io::Result<UserDb> {
        let root = rustix::fs::open(
            rootfs,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", rootfs.display())))?;
        Ok(UserDb {
            passwd: read_in_root(&root, "etc/passwd")?,
            group: read_in_root(&root, "etc/group")?,
        })
    }

    fn passwd_entries(&self) -> impl Iterator<Item = PasswdEntry<'_>> {
        self.passwd
            .iter()
            .flat_map(|t| t.lines())
            .filter_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                if f.len() < 4 || line.starts_with('#') {
                    return None;
                }
                Some(PasswdEntry {
                    name: f[0],
                    uid: f[2].trim().parse().ok()?,
                    gid: f[3].trim().parse().ok()?,
                })
            })
    }

    fn group_entries(&self) -> impl Iterator<Item = GroupEntry<'_>> {
        self.group
            .iter()
            .flat_map(|t| t.lines())
            .filter_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                if f.len() < 3 || line.starts_with('#') {
                    return None;
                }
                Some(GroupEntry {
                    name: f[0],
                    gid: f[2].trim().parse().ok()?,
                    members: f
                        .get(3)
                        .map(|m| {
                            m.split(',')
                                .map(str::trim)
                                .filter(|m| !m.is_empty())
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
    }
}

/// Reads `path` beneath the directory `root` as if `root` were `/`.
fn read_in_root(root: &std::os::fd::OwnedFd, path: &str) -> io::Result<Option<String>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = match rustix::fs::openat2(
        root,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(io::Error::new(e.kind(), format!("opening /{path}: {e}"))),
    };
    let mut file = std::fs::File::from(fd);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!("/{path} is not a regular file")));
    }
    let mut text = String::new();
    (&mut file)
        .take(MAX_DB_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| io::Error::new(e.kind(), format!("reading /{path}: {e}")))?;
    if text.len() as u64 > MAX_DB_BYTES {
        return Err(io::Error::other(format!(
            "/{path} is larger than {MAX_DB_BYTES} bytes"
        )));
    }
    Ok(Some(text))
}

/// The image's user as the runtime reports it to the kubelet (containerd `getUserFromImage`):
/// `(uid, username)`; the group part of `User` is dropped. No `User` is uid 0
/// (the kubelet's `getImageUser` treats it as root).
pub fn image_user(user: Option<&str>) -> (Option<i64>, String) {
    let user = user.unwrap_or_default();
    if user.is_empty() {
        return (Some(0), String::new());
    }
    let name = user.split(':').next().unwrap_or_default();
    match name.parse::<i64>() {
        Ok(uid) => (Some(uid), String::new()),
        Err(_) => (None, name.to_owned()),
    }
}

/// The process identity of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedUser {
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
    /// The supplementary groups, each once, the primary gid first.
    pub additional_gids: Vec<u32>,
}

/// Why a user could not be resolved; each is a `CreateContainerConfigError` (the kubelet's own
/// checks) or a `CreateContainerError` (what containerd refuses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    /// The kubelet refused the container (`verifyRunAsNonRoot`, an id out of range).
    #[error("{0}")]
    Config(String),
    /// The runtime could not resolve the user string in the image.
    #[error("{0}")]
    Runtime(String),
}

/// The container's user: `runAsUser`/`runAsGroup` (container over pod) over the image's
/// `User` (`image_user`, the raw string), checked against `runAsNonRoot`, resolved in `db`.
pub fn resolve_user(
    pod: &Pod,
    container: &Container,
    image_user_field: Option<&str>,
    db: &UserDb,
) -> Result<ResolvedUser, UserError> {
    let (image_uid, image_username) = image_user(image_user_field);
    verify_run_as_non_root(pod, container, image_uid, &image_username)
        .map_err(UserError::Config)?;
    let (run_as_user, run_as_group, _) = effective_run_as(pod, container);
    // determineEffectiveSecurityContext: runAsUser, else the image's uid, else its name.
    let user_part = match (run_as_user, image_uid) {
        (Some(uid), _) | (None, Some(uid)) => uid.to_string(),
        (None, None) => image_username,
    };
    // generateUserString.
    let user_string = match run_as_group {
        Some(gid) => format!("{user_part}:{gid}"),
        None => user_part,
    };
    let (uid, gid, username) = resolve_user_string(&user_string, db).map_err(UserError::Runtime)?;
    let mut gids = vec![gid];
    if !strict_policy(pod)
        && let Some(name) = username
    {
        // The groups listing the user, never the user's own group by name.
        gids.extend(
            db.group_entries()
                .filter(|g| g.name != name && g.members.contains(&name.as_str()))
                .map(|g| g.gid),
        );
    }
    gids.extend(pod_supplemental_groups(pod).map_err(UserError::Config)?);
    let mut seen = std::collections::HashSet::new();
    gids.retain(|g| seen.insert(*g));
    Ok(ResolvedUser {
        uid,
        gid,
        additional_gids: gids,
    })
}

/// `supplementalGroupsPolicy: Strict`.
fn strict_policy(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|sc| sc.supplemental_groups_policy.as_deref())
        == Some("Strict")
}

/// Resolves `user[:group]` in the image (containerd `WithUser`): `(uid, gid, user name for the
/// group lookup)`. A user string without a group that names no user in `/etc/group`'s
/// membership lists gets no extra groups (containerd `WithAdditionalGIDs` looks the string up
/// as a name only when it is a lone uid or name).
fn resolve_user_string(user: &str, db: &UserDb) -> Result<(u32, u32, Option<String>), String> {
    let parts: Vec<&str> = user.split(':').collect();
    let parse_id = |s: &str| s.parse::<u32>().ok();
    match parts.as_slice() {
        [one] => {
            if let Some(uid) = parse_id(one) {
                // A uid without an entry runs with gid 0.
                let entry = db.passwd_entries().find(|e| e.uid == uid);
                Ok((
                    uid,
                    entry.as_ref().map_or(0, |e| e.gid),
                    entry.map(|e| e.name.to_owned()),
                ))
            } else {
                let entry = db
                    .passwd_entries()
                    .find(|e| e.name == *one)
                    .ok_or_else(|| no_user(one))?;
                Ok((entry.uid, entry.gid, Some(entry.name.to_owned())))
            }
        }
        [u, g] => {
            let uid = match parse_id(u) {
                Some(uid) => uid,
                None => {
                    db.passwd_entries()
                        .find(|e| e.name == *u)
                        .ok_or_else(|| no_user(u))?
                        .uid
                }
            };
            let gid = match parse_id(g) {
                Some(gid) => gid,
                None => {
                    db.group_entries()
                        .find(|e| e.name == *g)
                        .ok_or_else(|| {
                            format!("unable to find group {g}: no matching entries in group file")
                        })?
                        .gid
                }
            };
            // With an explicit group, containerd looks up no membership (the whole string is
            // no user name).
            Ok((uid, gid, None))
        }
        _ => Err(format!("invalid USER value {user}")),
    }
}

fn no_user(name: &str) -> String {
    format!("unable to find user {name}: no matching entries in passwd file")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n\
                          app:x:1000:1000::/home/app:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\napp:x:1000:\nstaff:x:50:app,other\n\
                         audio:x:29:other\n";

    fn db() -> UserDb {
        UserDb {
            passwd: Some(PASSWD.into()),
            group: Some(GROUP.into()),
        }
    }

    fn pod(sc: Option<PodSecurityContext>) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: sc,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn container(sc: Option<SecurityContext>) -> Container {
        Container {
            name: "c".into(),
            security_context: sc,
            ..Default::default()
        }
    }

    fn user(image: Option<&str>, csc: Option<SecurityContext>) -> Result<ResolvedUser, UserError> {
        resolve_user(&pod(None), &container(csc), image, &db())
    }

    /// uid, gid, supplementary groups.
    type Ids = (u32, u32, Vec<u32>);

    fn ids(u: &ResolvedUser) -> Ids {
        (u.uid, u.gid, u.additional_gids.clone())
    }

    #[test]
    fn image_user_as_the_runtime_reports_it() {
        type Case<'a> = (Option<&'a str>, (Option<i64>, &'a str));
        let cases: [Case; 6] = [
            (None, (Some(0), "")),
            (Some(""), (Some(0), "")),
            (Some("1000"), (Some(1000), "")),
            (Some("1000:50"), (Some(1000), "")),
            (Some("app"), (None, "app")),
            (Some("app:staff"), (None, "app")),
        ];
        for (input, (uid, name)) in cases {
            assert_eq!(image_user(input), (uid, name.to_owned()), "{input:?}");
        }
    }

    #[test]
    fn image_user_resolved_in_the_image() {
        let cases: [(Option<&str>, Ids); 6] = [
            // No USER: root, its passwd group, no memberships.
            (None, (0, 0, vec![0])),
            // A uid with an entry takes its group and memberships.
            (Some("1000"), (1000, 1000, vec![1000, 50])),
            // The image's group is dropped on the way through the kubelet.
            (Some("1000:29"), (1000, 1000, vec![1000, 50])),
            // A uid without an entry: gid 0.
            (Some("4242"), (4242, 0, vec![0])),
            // A name.
            (Some("app"), (1000, 1000, vec![1000, 50])),
            (Some("nobody"), (65534, 65534, vec![65534])),
        ];
        for (image, want) in cases {
            let got = user(image, None).unwrap_or_else(|e| panic!("{image:?}: {e}"));
            assert_eq!(ids(&got), want, "{image:?}");
        }
    }

    #[test]
    fn run_as_user_and_group_override_the_image() {
        let sc = |u: Option<i64>, g: Option<i64>| SecurityContext {
            run_as_user: u,
            run_as_group: g,
            ..Default::default()
        };
        let cases: [(Option<&str>, SecurityContext, Ids); 4] = [
            (
                Some("app"),
                sc(Some(65534), None),
                (65534, 65534, vec![65534]),
            ),
            (None, sc(Some(1000), Some(29)), (1000, 29, vec![29])),
            (Some("app"), sc(None, Some(29)), (1000, 29, vec![29])),
            (None, sc(Some(7), None), (7, 0, vec![0])),
        ];
        for (image, sc, want) in cases {
            let got = user(image, Some(sc.clone())).unwrap();
            assert_eq!(ids(&got), want, "{image:?} {sc:?}");
        }
    }

    #[test]
    fn pod_groups_and_policy() {
        let psc = |policy: Option<&str>| PodSecurityContext {
            fs_group: Some(2000),
            supplemental_groups: Some(vec![3000, 50]),
            supplemental_groups_policy: policy.map(str::to_owned),
            ..Default::default()
        };
        let merge = resolve_user(&pod(Some(psc(None))), &container(None), Some("app"), &db());
        assert_eq!(merge.unwrap().additional_gids, vec![1000, 50, 2000, 3000]);
        let strict = resolve_user(
            &pod(Some(psc(Some("Strict")))),
            &container(None),
            Some("app"),
            &db(),
        );
        assert_eq!(strict.unwrap().additional_gids, vec![1000, 2000, 3000, 50]);
    }

    #[test]
    fn unresolvable_users_are_runtime_errors() {
        let cases: [(Option<&str>, Option<SecurityContext>, &str); 3] = [
            (
                Some("ghost"),
                None,
                "unable to find user ghost: no matching entries in passwd file",
            ),
            (
                Some("ghost"),
                Some(SecurityContext {
                    run_as_group: Some(5),
                    ..Default::default()
                }),
                "unable to find user ghost: no matching entries in passwd file",
            ),
            (None, None, ""),
        ];
        for (image, sc, want) in cases {
            match user(image, sc) {
                Err(UserError::Runtime(m)) => assert_eq!(m, want),
                Ok(_) if want.is_empty() => {}
                other => panic!("{image:?}: {other:?}"),
            }
        }
        // No passwd at all: a uid still works, a name does not.
        let empty = UserDb::default();
        let got = resolve_user(&pod(None), &container(None), Some("33"), &empty).unwrap();
        assert_eq!(ids(&got), (33, 0, vec![0]));
        assert!(resolve_user(&pod(None), &container(None), Some("www"), &empty).is_err());
    }

    #[test]
    fn run_as_non_root_with_the_kubelet_messages() {
        let non_root = |u: Option<i64>| SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: u,
            ..Default::default()
        };
        type Case<'a> = (Option<&'a str>, Option<i64>, Result<u32, &'a str>);
        let cases: [Case; 6] = [
            (
                None,
                None,
                Err(
                    "container has runAsNonRoot and image will run as root (pod: \"p_default(u1)\", container: c)",
                ),
            ),
            (
                Some("0:0"),
                None,
                Err(
                    "container has runAsNonRoot and image will run as root (pod: \"p_default(u1)\", container: c)",
                ),
            ),
            (
                Some("app"),
                None,
                Err(
                    "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: \"p_default(u1)\", container: c)",
                ),
            ),
            (
                Some("app"),
                Some(0),
                Err(
                    "container's runAsUser breaks non-root policy (pod: \"p_default(u1)\", container: c)",
                ),
            ),
            (Some("1000"), None, Ok(1000)),
            (Some("app"), Some(1000), Ok(1000)),
        ];
        for (image, uid, want) in cases {
            let got = user(image, Some(non_root(uid)));
            match (got, want) {
                (Ok(u), Ok(w)) => assert_eq!(u.uid, w),
                (Err(UserError::Config(m)), Err(w)) => assert_eq!(m, w),
                (got, want) => panic!("{image:?} {uid:?}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn reads_the_database_inside_the_root_only() {
        let dir = std::env::temp_dir().join(format!("podvisor-userdb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(dir.join("secret"), "host:x:0:0::/:/bin/sh\n").unwrap();
        // An absolute link resolves inside the root, a relative one cannot climb out.
        std::os::unix::fs::symlink("/../../secret", root.join("etc/passwd")).unwrap();
        std::os::unix::fs::symlink("../../secret", root.join("etc/group")).unwrap();
        let db = UserDb::read(&root).unwrap();
        assert_eq!(db, UserDb::default());
        std::fs::write(root.join("secret"), PASSWD).unwrap();
        let db = UserDb::read(&root).unwrap();
        assert_eq!(db.passwd.as_deref(), Some(PASSWD));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
