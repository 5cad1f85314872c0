//! End-to-end tests on the real local control plane. One binary, one module per area.

// A test harness: a failed expectation is a failed test, and a panic says so best.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agentauthz;
mod bench;
mod broadcastjob;
mod cli;
mod cli_migrate;
mod cli_restart;
mod cli_rollout;
mod cloneset;
mod conversion;
mod cronjob;
mod crr;
mod daemonset;
mod deploy;
mod envfrommetadata;
mod ephemeraljob;
mod foreignleader;
mod imagepull;
mod launchpriority;
mod migration;
mod persistentpodstate;
mod podprobemarker;
mod protection;
#[path = "pub.rs"]
mod pub_;
mod realnode;
mod resourcedistribution;
mod sidecarset;
mod smoke;
mod statefulset;
mod uniteddeployment;
mod webhook;
mod workloadspread;
