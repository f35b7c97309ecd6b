//! Electrophysiology for dspk: neural recording formats, probes, Phy sorting folders, ground truth and comparison metrics.
//!
//! Nothing is implemented yet: the formats, probes and metrics arrive with the synapse issue.

#![forbid(unsafe_code)]
