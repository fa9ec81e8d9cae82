//! `cargo test -p podvisor-apiserver --test manual -- --ignored --nocapture`: a server to
//! poke at by hand for `PODVISOR_MANUAL_SECS` seconds (default 600).

mod common;

#[test]
#[ignore = "manual: keeps a server running"]
fn manual_server() {
    let s = common::TestServer::start();
    println!("KUBECONFIG={}", s.kubeconfig.display());
    println!("LOGS={}", s.log_root.display());
    let secs = std::env::var("PODVISOR_MANUAL_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    std::thread::sleep(std::time::Duration::from_secs(secs));
}
