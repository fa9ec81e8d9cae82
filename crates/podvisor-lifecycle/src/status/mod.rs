//! Status generation pieces that are pure functions of API objects

pub mod conditions;
pub mod phase;
