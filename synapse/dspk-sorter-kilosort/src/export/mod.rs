//! What a sort hands out (`docs/KILOSORT4.md` §8.3, §9): the export post-processing, the
//! sorting, the Phy folder, the summary picture, quality metrics and EMUsort's unit score.

pub mod phy;
pub mod postprocess;
pub mod quality;
pub mod score;
pub mod sorting;
pub mod summary;
