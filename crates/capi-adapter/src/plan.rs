//! Launch and delete plans (in progress).
