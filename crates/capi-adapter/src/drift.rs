//! Drift detection (in progress).
