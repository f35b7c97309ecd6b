//! Detection recall against ground truth: how many true spikes a detector found.

/// The number of `truth` samples with a `found` sample within `tolerance` samples
/// (`found` sorted ascending; each true spike counts once, a found spike may serve several
/// true ones, as a detection recall does).
#[must_use]
pub fn recalled(truth: &[u64], found: &[u64], tolerance: u64) -> usize {
    truth
        .iter()
        .filter(|&&t| {
            let i = found.partition_point(|&f| f.saturating_add(tolerance) < t);
            found
                .get(i)
                .is_some_and(|&f| f <= t.saturating_add(tolerance))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recalled_counts_true_spikes_with_a_detection_in_tolerance() {
        let found = [10, 50, 100];
        assert_eq!(recalled(&[10, 12, 13, 38, 62, 63, 100, 200], &found, 12), 6);
        assert_eq!(recalled(&[0, 5], &found, 5), 1);
        assert_eq!(recalled(&[5], &[], 5), 0);
        assert_eq!(recalled(&[], &found, 5), 0);
        assert_eq!(recalled(&[u64::MAX - 1], &[u64::MAX - 3], 2), 1);
    }
}
