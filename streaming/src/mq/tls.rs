//! TLS to Redis: [`TlsOptions`], and how an [`Endpoint`](crate::mq::Endpoint) of a
//! `rediss://` URL takes them.

use crate::options::options;
use crate::Error;

options! {
    /// TLS to Redis beyond what the URL says: the URL's scheme turns TLS on (`rediss://`
    /// for one server, `rediss+cluster://` for a cluster); these options say which
    /// certificates to trust and which to present. All paths name PEM files, read when the
    /// connection is set up ([`Mq::connect`](crate::mq::Mq::connect), a Redis engine
    /// environment). Without any option the server's certificate is checked against the
    /// system's trusted roots.
    ///
    /// Needs the crate feature `tls`; without it, setting any option fails validation
    /// rather than being ignored. Options set for a URL without TLS (`redis://`) fail at
    /// connect.
    ///
    /// In a configuration file, the `tls` table of the queue options:
    ///
    /// ```toml
    /// [mq_options.tls]
    /// ca_file = "/etc/redis/ca.pem"
    /// client_cert_file = "/etc/redis/client.pem"
    /// client_key_file = "/etc/redis/client.key"
    /// ```
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TlsOptions;
    /// Builder of [`TlsOptions`]; [`TlsOptionsBuilder::build`] validates.
    pub struct TlsOptionsBuilder;
    /// Validates and returns the options.
    ///
    /// # Errors
    /// As [`TlsOptions::validate`].
    fn build = |t: TlsOptions| t.validate().map(|()| t);
    /// Reads TLS options from a file: as the `tls` table of [`MqOptions`](crate::mq::MqOptions)'s
    /// deserialization, then [`TlsOptions::validate`].
    ///
    /// # Errors
    /// As for [`MqOptions`](crate::mq::MqOptions); the field is named `tls.*`.
    impl Deserialize via TlsOptionsFile;
    {
        /// A PEM file of the certificate authorities to trust instead of the system's
        /// roots (a private CA). Default: the system's roots.
        pub ca_file: Option<String> = None, set(|p: impl Into<String>| Some(p.into()));
        /// A PEM file of the client certificate to present (servers started with
        /// `tls-auth-clients yes`); needs `client_key_file`.
        pub client_cert_file: Option<String> = None, set(|p: impl Into<String>| Some(p.into()));
        /// A PEM file of the client certificate's private key; needs `client_cert_file`.
        pub client_key_file: Option<String> = None, set(|p: impl Into<String>| Some(p.into()));
        /// **For tests only**: accept any server certificate, unchecked (a man in the
        /// middle can read everything). Default `false`.
        pub insecure_skip_verify_for_tests: bool = false;
    }
}

impl TlsOptions {
    /// Whether any option is set (else a `rediss://` URL alone decides).
    pub fn is_set(&self) -> bool {
        *self != TlsOptions::default()
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `tls.client_cert_file` or `tls.client_key_file` when
    /// only one of them is set, and `tls` when any option is set but the crate was built
    /// without its feature `tls`.
    pub fn validate(&self) -> Result<(), Error> {
        self.check_fields()?;
        let invalid = |field, reason: &str| Error::InvalidConfig {
            field,
            reason: reason.to_string(),
        };
        match (&self.client_cert_file, &self.client_key_file) {
            (Some(_), None) => {
                return Err(invalid("tls.client_key_file", "a client certificate needs its key: set `client_key_file` too"))
            }
            (None, Some(_)) => {
                return Err(invalid("tls.client_cert_file", "a client key needs its certificate: set `client_cert_file` too"))
            }
            _ => {}
        }
        if self.is_set() && !cfg!(feature = "tls") {
            return Err(invalid("tls", "TLS needs the crate feature `tls` (streaming = { features = [\"tls\"] })"));
        }
        Ok(())
    }

    /// The certificates these options name, read from their files, as redis-rs takes them
    /// (`redis::Client::build_with_tls`), for a connection of your own to the same server.
    /// Only with feature `tls`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the option whose file cannot be read.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn certificates(&self) -> Result<redis::TlsCertificates, Error> {
        let read = |field: &'static str, path: &str| {
            std::fs::read(path).map_err(|e| Error::InvalidConfig {
                field,
                reason: format!("cannot read `{path}`: {e}"),
            })
        };
        let root_cert = match &self.ca_file {
            Some(p) => Some(read("tls.ca_file", p)?),
            None => None,
        };
        let client_tls = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("tls.client_cert_file", cert)?,
                client_key: read("tls.client_key_file", key)?,
            }),
            _ => None,
        };
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}
