//! Clustering (`docs/KILOSORT4.md` §6.1-6.8, §8.1): spikes grouped by probe section, each group
//! clustered on its graph of nearest landmarks (`group`), the groups on the host's threads.
//!
//! The sort clusters twice ([`run`]): the universal detection's spikes at their template
//! centres (the first clustering, whose clusters become the learned templates), then the
//! matched spikes at their learned templates, where the merge tree also asks whether two
//! branches are cross-refractory (the final clustering).

pub(crate) mod group;
mod groups;

pub use groups::Clusters;
use groups::{ClusterInput, cluster_spikes};

use crate::Result;
use crate::detection::DetectedSpikes;
use crate::detection::centres::TemplateCentres;
use crate::runner::SortContext;
use crate::spikes::{LearnedChannels, MatchedSpikes};

/// What a clustering stage clusters.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// The first clustering (§6): the universal detection's spikes, attached to the template
    /// centres that found them.
    First {
        /// The detected spikes.
        spikes: &'a DetectedSpikes,
        /// The template centres.
        centres: &'a TemplateCentres,
    },
    /// The final clustering (§8.1): the matched spikes, attached to their learned templates.
    Final {
        /// The matched spikes.
        spikes: &'a MatchedSpikes,
        /// The channels of each learned template.
        channels: &'a LearnedChannels,
        /// The vertical spacing of the template centres (the groups' height is `2 dmin`).
        dmin: f32,
    },
}

/// A clustering stage on the host ("first clustering" or "final clustering", recorded in
/// `ctx`): `input`'s spikes grouped by probe section and clustered group by group on the
/// context's threads (`cluster_spikes`); each cluster's label, size and mean features.
///
/// # Errors
///
/// As `cluster_spikes`.
pub fn run(ctx: &mut SortContext, input: Input) -> Result<Clusters> {
    match input {
        Input::First { spikes, centres } => ctx.host("first clustering", |ctx| {
            let input = ClusterInput {
                item_positions: centres.positions(),
                item_channels: centres.nearest_channels(),
                nc: spikes.nc(),
                p: spikes.p(),
                spike_item: &spikes.centre,
                features: &spikes.features,
                times: None,
            };
            cluster(ctx, &input, centres.dmin())
        }),
        Input::Final {
            spikes,
            channels,
            dmin,
        } => ctx.host("final clustering", |ctx| {
            let sample_rate = ctx.sample_rate();
            let times: Vec<f64> = spikes
                .sample
                .iter()
                .map(|&s| s as f64 / sample_rate)
                .collect();
            let positions = ctx.probe().positions();
            let item_positions: Vec<[f32; 2]> = (0..channels.len())
                .map(|n| positions[channels.of(n)[0] as usize])
                .collect();
            let input = ClusterInput {
                item_positions: &item_positions,
                item_channels: &channels.channels,
                nc: channels.nc,
                p: spikes.p(),
                spike_item: &spikes.template,
                features: &spikes.features,
                times: ctx.settings().tree_cross_refractory.then_some(&times[..]),
            };
            cluster(ctx, &input, dmin)
        }),
    }
}

/// [`cluster_spikes`] on the context's probe, settings and threads.
fn cluster(ctx: &SortContext, input: &ClusterInput, dmin: f32) -> Result<Clusters> {
    let probe = ctx.probe();
    cluster_spikes(
        input,
        probe.len(),
        probe.positions(),
        dmin,
        ctx.settings(),
        ctx.threads(),
    )
}
