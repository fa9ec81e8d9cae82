#![allow(missing_docs)]
use podvisor_lifecycle::sim::{self, Script, SimOptions};
use k8s_openapi::api::core::v1::Pod;

#[test]
fn scratch() {
    let pod: Pod = serde_saphyr::from_str(&std::fs::read_to_string("/tmp/pv/sc.yaml").unwrap()).unwrap();
    let script = Script::parse(&std::fs::read_to_string("/tmp/pv/sc-script.yaml").unwrap()).unwrap();
    let recs = sim::simulate(pod, &script, &SimOptions::default()).unwrap();
    println!("{}", sim::text_report("sc", &recs));
}
