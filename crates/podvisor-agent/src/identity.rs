//! What the API server gives a pod on create: a name from `generateName`, a namespace, a uid
//! and a creation timestamp.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_api::meta::name_suffix;
pub use podvisor_api::meta::new_uid;

/// Fills in what the API server would on create; fields already set are kept.
pub fn admit(pod: &mut Pod, now: Timestamp) {
    let meta = &mut pod.metadata;
    if meta.name.as_deref().unwrap_or("").is_empty()
        && let Some(prefix) = meta.generate_name.as_deref()
    {
        meta.name = Some(format!("{prefix}{}", name_suffix()));
    }
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".to_string());
    }
    if meta.uid.as_deref().unwrap_or("").is_empty() {
        meta.uid = Some(new_uid());
    }
    if meta.creation_timestamp.is_none() {
        // The API stores whole seconds.
        let secs = Timestamp::from_second(now.as_second()).unwrap_or(now);
        meta.creation_timestamp = Some(Time(secs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_a_version_4_uuid() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(new_uid(), u);
    }

    #[test]
    fn admit_fills_in_what_the_api_server_would() {
        let mut pod = Pod::default();
        pod.metadata.generate_name = Some("job-".to_string());
        let now =
            Timestamp::from_second(1_767_225_600).unwrap() + jiff::SignedDuration::from_millis(700);
        admit(&mut pod, now);
        let name = pod.metadata.name.clone().unwrap();
        assert!(name.starts_with("job-") && name.len() == 9, "{name}");
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        assert!(pod.metadata.uid.is_some());
        assert_eq!(
            pod.metadata.creation_timestamp,
            Some(Time(Timestamp::from_second(1_767_225_600).unwrap()))
        );
    }

    #[test]
    fn admit_keeps_what_is_set() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".to_string());
        pod.metadata.namespace = Some("prod".to_string());
        pod.metadata.uid = Some("u1".to_string());
        admit(&mut pod, Timestamp::from_second(5).unwrap());
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(pod.metadata.uid.as_deref(), Some("u1"));
    }
}
