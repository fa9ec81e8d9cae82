//! `podvisor validate FILE...`: decode (strict), default and validate every
//! pod like the API server, listing every error.
//!
//! Output: `pod/<name> valid (<file>)` on stdout per valid pod; for an
//! invalid pod, kubectl's one-line `The Pod "web" is invalid: ...` on
//! stderr followed by one indented line per error. Exit code 0 when every
//! pod of every file is valid, 1 otherwise (unreadable files and decode
//! errors included).

use std::io::Read;
use std::path::{Path, PathBuf};

use podvisor_api::{
    FeatureGates, apply_defaults, decode_pods, drop_disabled_fields, validate_pod_with_gates,
};

/// Validates every pod in `files` (`-` reads stdin) and returns the exit code.
///
/// # Errors
///
/// None in practice: problems with one file are reported and counted, and
/// the other files are still checked.
pub fn run(files: &[PathBuf], gates: FeatureGates) -> anyhow::Result<i32> {
    let mut failed = false;
    for file in files {
        if !check_file(file, gates) {
            failed = true;
        }
    }
    Ok(i32::from(failed))
}

fn read_input(file: &Path) -> std::io::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file)
    }
}

/// Checks one file; returns whether everything in it was valid.
fn check_file(file: &Path, gates: FeatureGates) -> bool {
    let source = file.display().to_string();
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: reading {source}: {e}");
            return false;
        }
    };
    let pods = match decode_pods(&text, &source) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return false;
        }
    };
    let mut ok = true;
    for mut pod in pods {
        apply_defaults(&mut pod);
        drop_disabled_fields(&mut pod, None);
        match validate_pod_with_gates(&pod, gates) {
            Ok(()) => {
                let name = pod
                    .metadata
                    .name
                    .as_deref()
                    .or(pod.metadata.generate_name.as_deref())
                    .unwrap_or("");
                println!("pod/{name} valid ({source})");
            }
            // One error: kubectl's line. Several: its head, then one error per line (each
            // printed once).
            Err(e) if e.errors.len() == 1 => {
                ok = false;
                eprintln!("{e}");
            }
            Err(e) => {
                ok = false;
                eprintln!(
                    "The {} {} is invalid:",
                    e.kind,
                    podvisor_api::validation::go_quote(&e.name)
                );
                for err in &e.errors {
                    // A forbidden-update diff spans lines; keep it indented.
                    eprintln!("  * {}", err.to_string().replace('\n', "\n    "));
                }
            }
        }
        if let Some(hint) = pod
            .spec
            .as_ref()
            .and_then(|spec| podvisor_api::missing_gate_hint(spec, gates))
        {
            eprintln!("{hint}");
        }
    }
    ok
}
