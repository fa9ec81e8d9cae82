//! Object identity as the API server gives it: random version-4 UUIDs and the suffix
//! `generateName` appends. The one place podvisor draws randomness for identities, from the
//! operating system's generator (`getrandom`); there is no weaker fallback.

/// `n` random bytes from the operating system.
///
/// # Panics
/// When the kernel's random generator cannot be read (`getrandom(2)` fails), which leaves no
/// safe way to make identities or secrets.
#[must_use]
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the kernel's random generator (getrandom) is readable");
    b
}

/// A random (version 4) UUID, as the API server gives every new object (`uuid.NewUUID`).
#[must_use]
pub fn new_uid() -> String {
    let mut b: [u8; 16] = random_bytes();
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

/// The five characters `generateName` appends (the API server's `SimpleNameGenerator`, from
/// `utilrand.String`'s alphabet of consonants and digits without look-alikes).
#[must_use]
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes: [u8; 5] = random_bytes();
    bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}
