//! End-to-end scenarios live in `tests/`; see the crate description.
