//! What the blocked kernels need from a filter design, computed once in `f64` on the host.

/// A cascade of second-order sections prepared for the device: `[b0, b1, b2, a1, a2]` per
/// section and the state transition over one block.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// `[b0, b1, b2, a1, a2]` per section.
    pub(super) coefs: Vec<f64>,
    /// Row-major `2n x 2n` map from the cascade's state at a block's start to its state at the
    /// block's end when the input is zero (`n` sections).
    pub(super) transition: Vec<f64>,
}

impl Plan {
    /// The plan for `sections` (scipy's `sos` rows `[b0, b1, b2, a0, a1, a2]` with `a0 = 1`, as
    /// [`Sos`](crate::design::Sos) guarantees) and blocks of `block_len` samples.
    pub(super) fn new(sections: &[[f64; 6]], block_len: usize) -> Self {
        let coefs: Vec<f64> = sections
            .iter()
            .flat_map(|&[b0, b1, b2, _, a1, a2]| [b0, b1, b2, a1, a2])
            .collect();
        let dim = 2 * sections.len();
        let mut transition = vec![0.0; dim * dim];
        for column in 0..dim {
            let mut state = vec![0.0; dim];
            state[column] = 1.0;
            for _ in 0..block_len {
                step(&coefs, &mut state, 0.0);
            }
            for (row, value) in state.into_iter().enumerate() {
                transition[row * dim + column] = value;
            }
        }
        Self { coefs, transition }
    }
}

/// One sample through the cascade (direct form II transposed, as scipy's `sosfilt`): updates
/// `state` (`[z0, z1]` per section) and returns the output.
pub(super) fn step(coefs: &[f64], state: &mut [f64], input: f64) -> f64 {
    let mut u = input;
    for (c, z) in coefs.chunks_exact(5).zip(state.chunks_exact_mut(2)) {
        let y = c[0] * u + z[0];
        z[0] = c[1] * u - c[3] * y + z[1];
        z[1] = c[2] * u - c[4] * y;
        u = y;
    }
    u
}
