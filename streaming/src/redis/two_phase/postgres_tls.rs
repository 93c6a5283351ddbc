//! TLS for [`PostgresSink`](super::PostgresSink) (features `postgres` and `tls`): the
//! rustls client configuration [`TlsOptions`] describe.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::mq::TlsOptions;
use crate::Error;

/// The rustls configuration of `tls`: its CA file's certificates as the trusted roots (else
/// the system's), its client certificate and key, or no verification at all (tests only).
///
/// # Errors
/// [`Error::InvalidConfig`] naming the option whose file cannot be read or holds no usable
/// certificate or key.
pub(super) fn client_config(tls: &TlsOptions) -> Result<ClientConfig, Error> {
    tls.validate()?;
    let invalid = |field: &'static str, reason: String| Error::InvalidConfig { field, reason };
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls", e.to_string()))?;
    let builder = if tls.insecure_skip_verify_for_tests {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
    } else {
        builder.with_root_certificates(roots(tls)?)
    };
    match (&tls.client_cert_file, &tls.client_key_file) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| invalid("tls.client_cert_file", format!("`{cert}`: {e}")))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| invalid("tls.client_key_file", format!("`{key}`: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid("tls.client_key_file", e.to_string()))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// The process's default rustls crypto provider when the application installed one, else
/// ring's (the one feature `tls` builds rustls with).
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default().cloned().unwrap_or_else(|| {
        // Deprecated for its lack of post-quantum key exchange, which ring does not have.
        #[allow(deprecated)]
        Arc::new(rustls::crypto::ring::default_provider())
    })
}

/// The trusted roots: the CA file's certificates, or the system's.
fn roots(tls: &TlsOptions) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = match &tls.ca_file {
        Some(path) => CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| Error::InvalidConfig {
                field: "tls.ca_file",
                reason: format!("`{path}`: {e}"),
            })?,
        None => rustls_native_certs::load_native_certs().certs,
    };
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::InvalidConfig {
            field: "tls.ca_file",
            reason: "no usable CA certificate found".into(),
        });
    }
    Ok(roots)
}

/// Accepts any server certificate (`insecure_skip_verify_for_tests`); signatures are
/// still checked, so the handshake itself is sound.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
