//! capi-adapter (skeleton; filled in by its issue).
