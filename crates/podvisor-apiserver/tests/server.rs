//! podvisor-apiserver's wire tests with a small HTTPS client (`http`, `watch_list`), and the manual server
//! (`manual`), linked as one test binary. `tests/common` starts a real API server.

mod common;

mod http;
mod manual;
mod watch_list;
