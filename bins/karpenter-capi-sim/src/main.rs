fn main() { println!("karpenter-capi-sim: not built yet"); }
