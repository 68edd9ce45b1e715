//! karpenter-capi's offline simulator: drives the provisioning core with recorded or synthetic
//! workloads over simulated time and reports cost, utilisation, pending time and churn against
//! baselines.
