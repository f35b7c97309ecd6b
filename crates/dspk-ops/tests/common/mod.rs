//! Helpers shared by the dspk-ops integration tests: scipy/numpy reference files.
#![allow(dead_code)] // each test binary uses part of this module

use std::collections::HashMap;
use std::path::PathBuf;

/// One reference case written by `tests/reference/make_reference.py`: named arrays of `f64`.
#[derive(Debug)]
pub(crate) struct Reference {
    name: String,
    arrays: HashMap<String, (Vec<usize>, Vec<f64>)>,
}

impl Reference {
    /// Loads `tests/reference/<name>.ref`.
    ///
    /// # Panics
    ///
    /// When the file is missing or malformed (regenerate with `make_reference.py`).
    pub(crate) fn load(name: &str) -> Self {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/reference")
            .join(format!("{name}.ref"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run make_reference.py)", path.display()));
        let mut arrays = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let bad = || -> ! { panic!("{}:{}: malformed line", path.display(), number + 1) };
            let (key, rest) = line.split_once(": shape").unwrap_or_else(|| bad());
            let (shape, values) = rest.split_once('|').unwrap_or_else(|| bad());
            let shape: Vec<usize> = shape
                .split_whitespace()
                .map(|d| d.parse().unwrap_or_else(|_| bad()))
                .collect();
            let values: Vec<f64> = values
                .split_whitespace()
                .map(|v| match v {
                    "nan" => f64::NAN,
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    v => v.parse().unwrap_or_else(|_| bad()),
                })
                .collect();
            assert_eq!(
                shape.iter().product::<usize>(),
                values.len(),
                "{}:{}: shape and value count disagree",
                path.display(),
                number + 1
            );
            arrays.insert(key.trim().to_string(), (shape, values));
        }
        Self {
            name: name.to_string(),
            arrays,
        }
    }

    /// The values of `key`, C order.
    ///
    /// # Panics
    ///
    /// When the case has no such key.
    pub(crate) fn values(&self, key: &str) -> &[f64] {
        &self.get(key).1
    }

    /// The shape of `key` (empty for a scalar).
    ///
    /// # Panics
    ///
    /// When the case has no such key.
    pub(crate) fn shape(&self, key: &str) -> &[usize] {
        &self.get(key).0
    }

    /// The single value of a scalar `key`.
    ///
    /// # Panics
    ///
    /// When the case has no such key or it is not a single value.
    pub(crate) fn scalar(&self, key: &str) -> f64 {
        let values = self.values(key);
        assert_eq!(values.len(), 1, "{}: {key} is not a scalar", self.name);
        values[0]
    }

    /// The values of `key` as `f32` (device inputs).
    pub(crate) fn values_f32(&self, key: &str) -> Vec<f32> {
        self.values(key).iter().map(|&v| v as f32).collect()
    }

    fn get(&self, key: &str) -> &(Vec<usize>, Vec<f64>) {
        self.arrays
            .get(key)
            .unwrap_or_else(|| panic!("reference {} has no key {key}", self.name))
    }
}

/// `len` seeded pseudo-random values uniform in `[-0.5, 0.5)`, for property tests.
pub(crate) fn noise(len: usize, seed: u64) -> Vec<f64> {
    let mut rng = dspk_core::test_util::Rng::new(seed);
    (0..len).map(|_| rng.uniform(-0.5, 0.5)).collect()
}
