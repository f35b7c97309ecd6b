//! Spatial operators on the device: common average/median reference, covariance, whitening.
