//! Clustering (`docs/KILOSORT4.md` §6.1-6.8, §8.1): spikes grouped by probe section, each group
//! clustered on its graph of nearest landmarks.

pub mod group;
mod groups;

pub use groups::{ClusterInput, Clusters, assign_groups, cluster_spikes};
