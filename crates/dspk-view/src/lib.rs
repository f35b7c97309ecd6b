//! Min/max envelopes and pyramids for viewing dspk recordings, local or remote.
//!
//! Nothing is implemented yet: the envelopes arrive with the viewing issue.

#![forbid(unsafe_code)]
