//! Phy sorting folders.
