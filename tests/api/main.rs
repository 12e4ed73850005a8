//! API mode: the client against an in-process stand-in API server, and the `run` process against
//! one on loopback.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod api_process;
