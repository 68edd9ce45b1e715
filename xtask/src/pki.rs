//! Certificates and keys for the test control plane: a CA, the API server's serving
//! certificate (for 127.0.0.1 and localhost), an admin client certificate in
//! `system:masters`, and the service-account signing key. All ECDSA P-256, valid for as long
//! as rcgen's defaults allow: they live only on this machine, for tests.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Where each PEM file is.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
}

impl Pki {
    /// The file paths of a PKI that [`generate`] wrote into `dir`.
    pub fn at(dir: &Path) -> Self {
        Self {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
        }
    }
}

/// Writes a fresh PKI into `dir` (overwriting any old one).
pub fn generate(dir: &Path) -> Result<Pki> {
    std::fs::create_dir_all(dir)?;
    let pki = Pki::at(dir);

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "karpenter-capi test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    std::fs::write(&pki.ca_cert, ca_cert.pem())?;

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default.svc".to_string(),
    ])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;
    std::fs::write(&pki.serving_cert, serving_cert.pem())?;
    std::fs::write(&pki.serving_key, serving_key.serialize_pem())?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin
        .distinguished_name
        .push(DnType::CommonName, "kcapi-admin");
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;
    std::fs::write(&pki.admin_cert, admin_cert.pem())?;
    std::fs::write(&pki.admin_key, admin_key.serialize_pem())?;

    let sa_key = KeyPair::generate()?;
    std::fs::write(&pki.service_account_key, sa_key.serialize_pem())?;
    // The verifying side reads public keys only.
    std::fs::write(&pki.service_account_pub, sa_key.public_key_pem())?;
    Ok(pki)
}

/// A serving certificate for webhooks on 127.0.0.1, with its own CA: `tls.crt` and `tls.key`
/// in `dir` (controller-runtime's default names, for `--webhook-cert-dir`), and the CA's PEM
/// returned for the webhook configurations' and CRDs' `caBundle`.
pub fn webhook_serving(dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "karpenter-capi e2e webhook CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "e2e webhooks");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::write(dir.join("tls.crt"), cert.pem())?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
    Ok(ca_cert.pem())
}
