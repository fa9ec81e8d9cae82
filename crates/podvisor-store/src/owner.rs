//! State that must be this user's own.
//!
//! podvisor narrows its state (the directory 0700, the store, the token and keys 0600), but a
//! mode protects nothing from the file's owner: a state directory or store that another user
//! owns stays theirs to read (the token, the CA key, every pod spec) and to change back. So such
//! state is refused, as ssh refuses a key file with loose ownership, before anything is read
//! or narrowed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file or directory of the state that another user owns.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{path} is owned by {owner}, not by this user ({me}): {owner} could read the API's \
     token, its keys and every pod spec kept there, and change its mode back; give it to this \
     user (chown -R {me_name} {path}) if it is meant for this podvisor, or use another \
     --state-dir",
    path = .path.display(),
    owner = user_text(.owner_uid, .owner_name.as_deref()),
    me = user_text(.uid, .name.as_deref()),
    me_name = .name.clone().unwrap_or_else(|| .uid.to_string()),
)]
pub struct NotOwned {
    /// The file or directory.
    pub path: PathBuf,
    /// Its owner.
    pub owner_uid: u32,
    /// The owner's user name, where `/etc/passwd` has one.
    pub owner_name: Option<String>,
    /// This process's effective user.
    pub uid: u32,
    /// Its user name.
    pub name: Option<String>,
}

fn user_text(uid: &u32, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("user {name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// Fails with [`NotOwned`] when `path` (itself, not a symlink's target) exists and is not
/// owned by this process's effective user; a path that does not exist is fine (it will be
/// created as this user's).
///
/// # Errors
///
/// [`NotOwned`]; an unreadable path is left to whoever opens it next.
pub fn require_owned(path: &Path) -> Result<(), NotOwned> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() == uid {
        return Ok(());
    }
    Err(NotOwned {
        path: path.to_path_buf(),
        owner_uid: meta.uid(),
        owner_name: user_name(meta.uid()),
        uid,
        name: user_name(uid),
    })
}

/// The name `/etc/passwd` gives `uid`.
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let wanted = uid.to_string();
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == wanted).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_users_own_files_and_missing_ones_pass() {
        let dir = std::env::temp_dir().join(format!("pv-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(require_owned(&dir).is_ok());
        assert!(require_owned(&dir.join("not-there")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_refusal_names_the_owner_and_the_fix() {
        let e = NotOwned {
            path: PathBuf::from("/var/lib/podvisor"),
            owner_uid: 1000,
            owner_name: Some("alice".into()),
            uid: 0,
            name: Some("root".into()),
        };
        assert_eq!(
            e.to_string(),
            "/var/lib/podvisor is owned by user alice (uid 1000), not by this user (user root \
             (uid 0)): user alice (uid 1000) could read the API's token, its keys and every pod \
             spec kept there, and change its mode back; give it to this user (chown -R root \
             /var/lib/podvisor) if it is meant for this podvisor, or use another --state-dir"
        );
    }

    #[test]
    fn user_names_come_from_the_password_file() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_name(4_000_000_000), None);
    }
}
