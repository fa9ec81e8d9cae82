//! What the API server gives a pod on create: a name from `generateName`, a namespace, a uid
//! and a creation timestamp.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// A random (version 4) UUID.
pub fn new_uid() -> String {
    let mut b = random_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The five characters `generateName` appends (apiserver's `SimpleNameGenerator` alphabet).
fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random_bytes()[..5]
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

/// 16 random bytes from `/dev/urandom`; if it cannot be read, a mix of the time, the pid and a
/// counter (unique, if not unpredictable).
fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let t = Timestamp::now().as_nanosecond().unsigned_abs();
        let mixed = splitmix(t ^ u128::from(std::process::id()) << 64 ^ u128::from(n));
        b = mixed.to_le_bytes();
    }
    b
}

fn splitmix(x: u128) -> u128 {
    let mut lo = (x as u64) ^ ((x >> 64) as u64);
    let mut out = 0u128;
    for _ in 0..2 {
        lo = lo.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = lo;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out = (out << 64) | u128::from(z);
    }
    out
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
