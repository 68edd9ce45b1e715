//! karpenter-capi's offline simulator: drives the provisioning core with recorded or synthetic
//! workloads over simulated time and reports cost, utilisation, pending time and churn against
//! baselines.
//!
//! Map: [`scenario`] (the file format) -> [`world`] (compiled into core model values, with
//! [`convert`], [`catalog`], [`importers`], [`generators`]) -> [`engine`] (discrete-event
//! simulation driving a [`strategy`], logging its disruption commands in [`command_log`]) ->
//! [`metrics`] -> [`report`] (JSON, terminal table, HTML with SVG plots), with [`bound`] (the
//! lower bound over time, once per world). [`run`] ties them together across strategies and
//! seeds with rayon; [`compare`] judges one strategy against a baseline over many workloads,
//! and [`sweep`] does so once per value of one knob.

pub mod bound;
pub mod catalog;
pub mod command_log;
pub mod compare;
pub mod convert;
pub mod csv_table;
pub mod engine;
pub mod error;
pub mod generators;
pub mod importers;
pub mod outages;
pub mod pdb;
pub mod plots;
pub mod predicates;
pub mod quantity;
pub mod replay;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod strategy;
pub mod sweep;
pub mod world;
pub mod yamlpath;

pub use error::{Result, SimError};
