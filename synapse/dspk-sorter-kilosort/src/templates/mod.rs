//! Learned templates (`docs/KILOSORT4.md` §6.9) and matching them against the recording (§7).

pub mod learned;
pub mod matching;
