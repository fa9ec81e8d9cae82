//! The binary's commands for people without kubectl, linked as one test binary: `podvisor
//! run` (`run`) and `apply/get/describe/logs/delete` against a real `serve` compared with
//! kubectl (`cli`), what a new user meets first (`first_hour`), `lint` with the `simulate`
//! commands it prints (`lint`), and the timeline of `simulate --output html|svg` and
//! `dashboard` in a headless browser (`timeline`), and `simulate` without a script against a
//! real `run` of the same pod (`simulate_twin`).

mod common;

mod cli;
mod feature_gates_cli;
mod first_hour;
mod lint;
mod run;
mod simulate_twin;
mod timeline;
