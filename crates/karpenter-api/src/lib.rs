//! karpenter-api (skeleton; filled in by its issue).
