//! The README, `docs/` and `ARCHITECTURE.md` stay true to the code: tables, commands, names and the
//! module graph.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod decisions;
mod docs;
mod layers;
mod names;
mod readme;
