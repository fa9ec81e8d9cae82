//! podvisor-apiserver driven by the real kubectl (`PODVISOR_KUBECTL`, else the one on PATH),
//! linked as one test binary: `scripts/test` runs it twice, the second time with kubectl 1.34.
//! `tests/common` starts a real API server.

mod common;

mod kubectl_auth;
mod kubectl_authz;
mod kubectl_configs;
mod kubectl_debug;
mod kubectl_filters;
mod kubectl_logs_events;
mod kubectl_namespaces;
mod kubectl_nodes;
mod kubectl_openapi;
mod kubectl_pods;
mod kubectl_rbac;
mod kubectl_resize;
mod kubectl_scheduling;
mod kubectl_services;
mod kubectl_watch;
