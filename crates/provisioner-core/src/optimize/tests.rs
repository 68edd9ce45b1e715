//! Property tests of the optimiser.
