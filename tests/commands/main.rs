//! The commands an operator runs (`check`, `inject`, `policy`, the CLI, the demo) and the shipped
//! manifests and recipes, through the real binary and the real tools, one module per subject.

#[path = "../common/mod.rs"]
mod common;

mod adapt;
mod alerts;
mod api_versions;
mod chart;
mod check;
mod check_inject;
mod check_known_good;
mod check_rollout;
mod cli;
mod demo;
mod health;
mod inject;
mod known_good_rbac;
mod manifests;
mod policy;
mod policy_record;
mod static_pods;
