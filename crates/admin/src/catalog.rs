//! A price and shape catalog from CSV (the format of `aws-ec2-us-east-1.csv`):
//! `instance_type,vcpu,memory_mib,gpu,arch,on_demand_usd_per_hour`, columns found by name,
//! one line per instance type. `setup` uses it to fill capacity and price of resources whose
//! instance type it knows (OpenShift on AWS, AWS machine templates, instance-type labels).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::Error;

/// One instance type of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogEntry {
    pub instance_type: String,
    pub vcpu: i64,
    pub memory_mib: i64,
    pub gpu: i64,
    pub arch: String,
    pub price_per_hour: f64,
}

/// Instance types by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceCatalog {
    pub entries: BTreeMap<String, CatalogEntry>,
}

const COLUMNS: [&str; 6] = [
    "instance_type",
    "vcpu",
    "memory_mib",
    "gpu",
    "arch",
    "on_demand_usd_per_hour",
];

impl PriceCatalog {
    pub fn load(path: &Path) -> Result<PriceCatalog, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Catalog {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        PriceCatalog::parse(&text).map_err(|reason| Error::Catalog {
            path: path.display().to_string(),
            reason,
        })
    }

    /// Parses the CSV; an error names the line and column.
    pub fn parse(text: &str) -> Result<PriceCatalog, String> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers = reader.headers().map_err(|e| e.to_string())?.clone();
        let mut index = BTreeMap::new();
        for col in COLUMNS {
            let i = headers
                .iter()
                .position(|h| h == col)
                .ok_or_else(|| format!("missing column {col}"))?;
            index.insert(col, i);
        }
        let mut entries = BTreeMap::new();
        for (n, record) in reader.records().enumerate() {
            let line = n + 2;
            let record = record.map_err(|e| format!("line {line}: {e}"))?;
            let field = |c: &str| record.get(index[c]).unwrap_or("").to_string();
            let int = |c: &str| -> Result<i64, String> {
                let v = field(c);
                v.parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("line {line}: column {c}: {v:?} is not a count"))
            };
            let price_text = field("on_demand_usd_per_hour");
            let price = price_text
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| {
                    format!(
                        "line {line}: column on_demand_usd_per_hour: {price_text:?} is not a price"
                    )
                })?;
            let name = field("instance_type");
            if name.is_empty() {
                return Err(format!("line {line}: empty instance_type"));
            }
            entries.insert(
                name.clone(),
                CatalogEntry {
                    instance_type: name,
                    vcpu: int("vcpu")?,
                    memory_mib: int("memory_mib")?,
                    gpu: int("gpu")?,
                    arch: field("arch"),
                    price_per_hour: price,
                },
            );
        }
        Ok(PriceCatalog { entries })
    }

    pub fn get(&self, instance_type: &str) -> Option<&CatalogEntry> {
        self.entries.get(instance_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_by_column_name() {
        let c = PriceCatalog::parse(
            "arch,instance_type,vcpu,memory_mib,gpu,on_demand_usd_per_hour\narm64,a1.large,2,4096,0,0.051\n",
        )
        .unwrap();
        let e = c.get("a1.large").unwrap();
        assert_eq!((e.vcpu, e.memory_mib, e.gpu), (2, 4096, 0));
        assert_eq!(e.arch, "arm64");
        assert!((e.price_per_hour - 0.051).abs() < 1e-12);
    }

    #[test]
    fn bad_values_name_line_and_column() {
        let err = PriceCatalog::parse(
            "instance_type,vcpu,memory_mib,gpu,arch,on_demand_usd_per_hour\nx,2,4096,0,amd64,-1\n",
        )
        .unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("on_demand_usd_per_hour"),
            "{err}"
        );
        let err = PriceCatalog::parse("instance_type,vcpu\n").unwrap_err();
        assert!(err.contains("missing column memory_mib"), "{err}");
    }
}
