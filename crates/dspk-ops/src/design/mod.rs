//! Filter design in `f64` on the host (scipy.signal semantics), and `f64` host references of the filters.
