//! Which infrastructure errors mean "the cloud has no capacity for this shape here, now".
//!
//! An infrastructure provider that cannot get an instance often does not fail its Machine: the
//! Cluster API provider for AWS marks the AWSMachine `InstanceReady=False`
//! (`InstanceProvisionFailed`, the EC2 error in the message) and retries `RunInstances`, and
//! CAPI mirrors that into the Machine's `InfrastructureReady` condition; OpenShift's Machine
//! API providers write the error into `providerStatus.conditions` and retry. Waiting for the
//! providerID timeout there costs ten minutes per failed Machine in a zone that ran out, where
//! Karpenter on AWS learns the same from its CreateFleet answer at once. An error that names
//! a capacity code is as good as a failure: retrying the same shape in the same zone seconds
//! later rarely helps, while backing it off sends the pods to another shape now.
//!
//! Errors that do not name such a code (throttling, a transient API error) are left to the
//! provider's retries and the providerID timeout, as before.

/// The capacity codes recognised out of the box. Matched as whole words (letters, digits and
/// `_`), so `Unsupported` matches EC2's `Unsupported: Your requested instance type ... is not
/// supported in your requested Availability Zone` but not `UnsupportedOperation`.
pub const DEFAULT_CODES: &[&str] = &[
    // EC2 (RunInstances and CreateFleet error codes).
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacityOnOutpost",
    "InsufficientFreeAddressesInSubnet",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "UnfulfillableCapacity",
    "ReservationCapacityExceeded",
    "VcpuLimitExceeded",
    "InstanceLimitExceeded",
    "Unsupported",
    // Azure (VM and scale-set allocation).
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
    "SkuNotAvailable",
    // Google Compute Engine.
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "QUOTA_EXCEEDED",
    // Generic reasons providers and test infrastructure write.
    "InsufficientCapacity",
];

/// Phrases (case-insensitive) that say the same where no code is written: OpenStack's
/// scheduler, and providers that paraphrase.
pub const DEFAULT_PHRASES: &[&str] = &["no valid host was found", "insufficient capacity"];

/// A classifier of infrastructure error messages: the default codes and phrases plus any the
/// operator adds (`--capacity-error-code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityErrors {
    codes: Vec<String>,
    phrases: Vec<String>,
}

impl Default for CapacityErrors {
    fn default() -> Self {
        CapacityErrors {
            codes: DEFAULT_CODES.iter().map(|c| c.to_string()).collect(),
            phrases: DEFAULT_PHRASES.iter().map(|p| p.to_string()).collect(),
        }
    }
}

impl CapacityErrors {
    /// The defaults plus `extra`: an entry of one word is a code (matched as a whole word,
    /// case-sensitive, as clouds spell their codes), an entry with spaces a phrase
    /// (case-insensitive). Blank entries are ignored.
    pub fn with_extra<S: AsRef<str>>(extra: impl IntoIterator<Item = S>) -> Self {
        let mut out = Self::default();
        for e in extra {
            let e = e.as_ref().trim();
            if e.is_empty() {
                continue;
            }
            if e.chars().any(char::is_whitespace) {
                out.phrases.push(e.to_lowercase());
            } else {
                out.codes.push(e.to_string());
            }
        }
        out
    }

    /// No codes or phrases at all: nothing is read as a capacity error (the behaviour before
    /// this classifier, for a test or an operator who wants only the timeout).
    pub fn none() -> Self {
        CapacityErrors {
            codes: Vec::new(),
            phrases: Vec::new(),
        }
    }

    /// The code or phrase `message` names, if any.
    pub fn find(&self, message: &str) -> Option<&str> {
        let words: Vec<&str> = message
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(code) = self.codes.iter().find(|c| words.contains(&c.as_str())) {
            return Some(code);
        }
        let lower = message.to_lowercase();
        self.phrases
            .iter()
            .find(|p| lower.contains(p.as_str()))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_messages_name_their_code() {
        let c = CapacityErrors::default();
        let capa = "failed to create AWSMachine instance: failed to run instance: \
                    InsufficientInstanceCapacity: We currently do not have sufficient m5.large \
                    capacity in the Availability Zone you requested (us-east-1a).";
        assert_eq!(c.find(capa), Some("InsufficientInstanceCapacity"));
        let unsupported = "Unsupported: Your requested instance type (p4d.24xlarge) is not \
                           supported in your requested Availability Zone (us-east-1e).";
        assert_eq!(c.find(unsupported), Some("Unsupported"));
        let azure = "Code=\"ZonalAllocationFailed\" Message=\"Allocation failed.\"";
        assert_eq!(c.find(azure), Some("ZonalAllocationFailed"));
        let gce = "googleapi: Error 503: The zone 'projects/p/zones/us-central1-a' does not \
                   have enough resources available to fulfill the request., \
                   ZONE_RESOURCE_POOL_EXHAUSTED";
        assert_eq!(c.find(gce), Some("ZONE_RESOURCE_POOL_EXHAUSTED"));
        let openstack = "Build of instance abc aborted: No valid host was found. There are \
                         not enough hosts available.";
        assert_eq!(c.find(openstack), Some("no valid host was found"));
    }

    #[test]
    fn other_errors_are_not_capacity() {
        let c = CapacityErrors::default();
        for m in [
            "RequestLimitExceeded: Request limit exceeded.",
            "UnsupportedOperation: The instance configuration is not supported",
            "failed to get bootstrap data: secret not found",
            "WaitingForBootstrapData",
            "",
        ] {
            assert_eq!(c.find(m), None, "{m}");
        }
        assert_eq!(
            CapacityErrors::none().find("InsufficientInstanceCapacity"),
            None
        );
    }

    #[test]
    fn operators_add_codes_and_phrases() {
        let c = CapacityErrors::with_extra(["StockoutInZone", " out of hosts ", ""]);
        assert_eq!(c.find("error: StockoutInZone (z1)"), Some("StockoutInZone"));
        assert_eq!(c.find("Cluster is OUT OF HOSTS"), Some("out of hosts"));
        assert_eq!(c.find("stockoutinzone"), None, "codes are case-sensitive");
        assert_eq!(
            c.find("InsufficientInstanceCapacity"),
            Some("InsufficientInstanceCapacity"),
            "the defaults stay"
        );
    }
}
