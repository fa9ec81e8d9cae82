//! The example manifests under `examples/` decode, default and validate as
//! documented: `web.yaml` and `sidecar.yaml` are valid, `invalid.yaml`
//! lists every one of its mistakes.

use podvisor_api::{apply_defaults, decode_pods, validate_pod};

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn validate_example(name: &str) -> Result<(), podvisor_api::ValidationErrors> {
    let mut pods = decode_pods(&example(name), name).expect("example decodes");
    assert_eq!(pods.len(), 1);
    apply_defaults(&mut pods[0]);
    for c in pods[0].spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    }) {
        assert!(
            c.command.is_some(),
            "{name}: container {} needs a command",
            c.name
        );
        assert_eq!(c.image.as_deref(), Some("busybox"));
    }
    validate_pod(&pods[0])
}

#[test]
fn web_example_is_valid() {
    validate_example("web.yaml").unwrap();
}

#[test]
fn sidecar_example_is_valid() {
    validate_example("sidecar.yaml").unwrap();
}

#[test]
fn invalid_example_lists_every_error() {
    let err = validate_example("invalid.yaml").unwrap_err();
    let text = err.to_string();
    println!("{text}");
    let expected = [
        "metadata.name: Invalid value: \"Invalid_Pod\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.containers[1].name: Duplicate value: \"app\"",
        "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
    ];
    let got: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(got, expected);
    assert!(text.starts_with("The Pod \"Invalid_Pod\" is invalid: [metadata.name: Invalid value"));
    assert!(text.ends_with("supported values: \"Always\", \"OnFailure\", \"Never\"]"));
}

#[test]
fn resize_example_is_valid() {
    validate_example("resize.yaml").unwrap();
}
