//! What a sandbox remembers of the network it was attached with: the list as it ran (name,
//! every plugin's configuration) and the `ADD`'s result. Its `DEL` runs exactly that, with
//! that result as `prevResult`, whatever the node's configuration says by then: libcni keeps
//! the same in its cache (`/var/lib/cni/results`), which is what containerd's go-cni deletes
//! with. A configuration directory that changed under running pods (another tool's conflist
//! dropped in, a network add-on replaced) then strands nothing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CniResult, NetworkConfigList};

/// A sandbox's attachment record (kept in `<pod dir>/network.json`, and beside each pooled
/// sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachedNetwork {
    /// The network's `name`.
    pub name: String,
    /// The list as it ran, a `.conflist` document ([`NetworkConfigList::to_conflist`]).
    pub config: Value,
    /// What the `ADD` printed (the list's result).
    pub result: Value,
}

impl AttachedNetwork {
    /// The record of an attachment of `list` that produced `result`.
    #[must_use]
    pub fn new(list: &NetworkConfigList, result: &CniResult) -> AttachedNetwork {
        AttachedNetwork {
            name: list.name.clone(),
            config: list.to_conflist(),
            result: result.raw.clone(),
        }
    }

    /// The list it was attached with.
    ///
    /// # Errors
    /// The recorded document is not a valid list (a damaged record).
    pub fn list(&self) -> Result<NetworkConfigList, String> {
        NetworkConfigList::from_conflist_bytes(self.config.to_string().as_bytes())
    }
}

/// The network new pods were given, as an agent last chose it (`<state>/cni/pod-network.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ChosenNetwork {
    name: String,
    /// The file it was read from, if any.
    source: Option<std::path::PathBuf>,
    config: Value,
}

/// Records `list` as the network of new pods in `file` and says how it differs from the one
/// recorded there before (`None`: the same, or nothing was recorded). A change of network is
/// thus told in the agent's log, never silent; pods attached before keep theirs (their own
/// records, [`AttachedNetwork`]).
///
/// # Errors
/// The record cannot be written.
pub fn note_network_choice(
    file: &std::path::Path,
    list: &NetworkConfigList,
) -> std::io::Result<Option<String>> {
    let chosen = ChosenNetwork {
        name: list.name.clone(),
        source: list.source.clone(),
        config: list.to_conflist(),
    };
    let before: Option<ChosenNetwork> = std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    if before.as_ref() == Some(&chosen) {
        return Ok(None);
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&chosen).expect("JSON"))?;
    std::fs::rename(&tmp, file)?;
    let describe = |c: &ChosenNetwork| match &c.source {
        Some(path) => format!("{:?} ({})", c.name, path.display()),
        None => format!("{:?}", c.name),
    };
    Ok(before.map(|before| {
        let what = if before.name == chosen.name && before.source == chosen.source {
            "its configuration changed".to_owned()
        } else {
            format!("was {}", describe(&before))
        };
        format!(
            "the network of new pods is now {}: {what}; running pods keep the network they \
             were attached with",
            describe(&chosen)
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_network_is_told_once() {
        let dir = std::env::temp_dir().join(format!("pv-cni-choice-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("cni").join("pod-network.json");
        let list = |name: &str, bridge: &str| {
            NetworkConfigList::from_conflist_bytes(
                format!(
                    r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"bridge","bridge":"{bridge}"}}]}}"#
                )
                .as_bytes(),
            )
            .unwrap()
        };
        // The first choice, and the same again: nothing to tell.
        assert_eq!(
            note_network_choice(&file, &list("podvisor", "pv0")).unwrap(),
            None
        );
        assert_eq!(
            note_network_choice(&file, &list("podvisor", "pv0")).unwrap(),
            None
        );
        let told = note_network_choice(&file, &list("podman", "podman0"))
            .unwrap()
            .unwrap();
        assert!(told.contains("\"podman\""), "{told}");
        assert!(told.contains("was \"podvisor\""), "{told}");
        assert!(told.contains("running pods keep"), "{told}");
        let told = note_network_choice(&file, &list("podman", "cni0"))
            .unwrap()
            .unwrap();
        assert!(told.contains("its configuration changed"), "{told}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
