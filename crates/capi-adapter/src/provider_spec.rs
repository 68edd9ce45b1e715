//! What we read from an OpenShift MachineSet's `providerSpec.value` (AWS, Azure, GCP):
//! instance type, zone, region, spot.

/// What we understand of an OpenShift `providerSpec.value` (AWS, Azure, GCP).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderSpecFacts {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub region: Option<String>,
    pub spot: bool,
}

impl ProviderSpecFacts {
    pub fn read(v: Option<&serde_json::Value>) -> Self {
        let Some(v) = v else {
            return ProviderSpecFacts::default();
        };
        let s = |p: &str| {
            v.pointer(p)
                .and_then(|x| x.as_str())
                .filter(|x| !x.is_empty())
                .map(str::to_string)
        };
        // AWS
        if let Some(it) = s("/instanceType") {
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: s("/placement/availabilityZone"),
                region: s("/placement/region"),
                spot: v.get("spotMarketOptions").is_some_and(|x| !x.is_null()),
            };
        }
        // Azure: zones are "1", "2", "3"; the node label is "<location>-<zone>".
        if let Some(it) = s("/vmSize") {
            let location = s("/location");
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: match (&location, s("/zone")) {
                    (Some(l), Some(z)) => Some(format!("{l}-{z}")),
                    _ => None,
                },
                region: location,
                spot: v.get("spotVMOptions").is_some_and(|x| !x.is_null()),
            };
        }
        // GCP
        if let Some(it) = s("/machineType") {
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: s("/zone"),
                region: s("/region"),
                spot: v.get("preemptible").and_then(|x| x.as_bool()) == Some(true)
                    || s("/provisioningModel").as_deref() == Some("Spot"),
            };
        }
        ProviderSpecFacts::default()
    }
}
