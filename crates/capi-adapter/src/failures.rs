//! Launch-failure detection (in progress).
