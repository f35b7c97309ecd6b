//! Ground truth: comparison of a sorting with known spike trains, and synthetic recordings.
