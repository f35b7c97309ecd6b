//! Intan `.rhd` recordings.
