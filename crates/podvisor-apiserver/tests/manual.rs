//! `PODVISOR_MANUAL_SECS=600 cargo test -p podvisor-apiserver --test server -- manual --ignored
//! --nocapture`: a server to poke at by hand for that many seconds. Not a test: without
//! `PODVISOR_MANUAL_SECS` it returns at once (CI runs the ignored tests, as root).

use crate::common;

#[test]
#[ignore = "manual: keeps a server running"]
fn manual_server() {
    let Some(secs) = std::env::var("PODVISOR_MANUAL_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        println!("PODVISOR_MANUAL_SECS is not set: no manual server");
        return;
    };
    let s = common::TestServer::start();
    println!("KUBECONFIG={}", s.kubeconfig.display());
    println!("LOGS={}", s.log_root.display());
    std::thread::sleep(std::time::Duration::from_secs(secs));
}
