//! Where the queue and the Redis engine connect: one Redis server or a Redis Cluster.

use redis::cluster::ClusterClient;
use redis::IntoConnectionInfo;

use crate::Error;

/// The URL scheme of a Redis Cluster: `redis+cluster://host:port[,host:port…]`.
pub const CLUSTER_SCHEME: &str = "redis+cluster://";

/// The URL scheme of a Redis Cluster reached over TLS (feature `tls`):
/// `rediss+cluster://host:port[,host:port…]`.
pub const CLUSTER_TLS_SCHEME: &str = "rediss+cluster://";

/// A Redis deployment to connect to: one server, or a Redis Cluster reached through seed
/// nodes (any reachable node tells the client the others and which master serves which
/// hash slot).
///
/// Made from a URL by [`Endpoint::parse`] — `redis://…`, `rediss://…`, `unix://…` name one
/// server, `redis+cluster://[user:password@]host:port[,host:port…][/]` names a cluster by
/// its seed nodes — or by [`Endpoint::single`] / [`Endpoint::cluster`]. Cheap to clone.
///
/// Everything above the connection is the same on both: every key of one topic partition
/// carries the partition's hash tag, so each script and transaction runs in one slot.
/// On a cluster, as on one server, every call is bounded by the response timeout and makes
/// one attempt (no retry after a redirect or a lost connection; the caller's loop tries
/// again, and the client refreshes its slot map after a `MOVED` reply).
#[derive(Clone)]
pub struct Endpoint {
    kind: Kind,
}

#[derive(Clone)]
pub(crate) enum Kind {
    Single(redis::Client),
    Cluster {
        client: ClusterClient,
        /// The seed nodes, `host:port`, as given.
        seeds: Vec<String>,
        /// The seed nodes' connection settings (to build the client again with TLS
        /// certificates).
        infos: Vec<redis::ConnectionInfo>,
    },
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Single(_) => write!(f, "Endpoint::Single({})", self.address()),
            Kind::Cluster { .. } => write!(f, "Endpoint::Cluster({})", self.address()),
        }
    }
}

impl Endpoint {
    /// The deployment `url` names: a cluster for `redis+cluster://` (seed nodes separated
    /// by commas, each `host:port`, credentials before the first one apply to all), else
    /// one server (any URL `redis::Client::open` accepts).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `url`) for a malformed `redis+cluster://` URL: no
    /// node, an empty host, a port that is not a number, a database other than 0, a unix
    /// socket; also (field `url`) when a one-server URL is invalid.
    pub fn parse(url: &str) -> Result<Self, Error> {
        if let Some(rest) = strip_scheme(url, CLUSTER_TLS_SCHEME) {
            return Self::cluster(cluster_node_urls(url, rest, "rediss")?);
        }
        match strip_scheme(url, CLUSTER_SCHEME) {
            Some(rest) => Self::cluster(cluster_node_urls(url, rest, "redis")?),
            None => Ok(Self::single(open_url(url)?)),
        }
    }

    /// The deployment `url` names ([`parse`](Self::parse)), reached with the TLS
    /// certificates of `tls` ([`with_tls`](Self::with_tls)).
    ///
    /// # Errors
    /// As [`parse`](Self::parse) and [`with_tls`](Self::with_tls).
    pub fn parse_with_tls(url: &str, tls: &crate::mq::TlsOptions) -> Result<Self, Error> {
        Self::parse(url)?.with_tls(tls)
    }

    /// This endpoint with the TLS certificates of `tls`: the CA to trust, the client
    /// certificate to present, or (tests only) no verification. Unchanged when `tls` sets
    /// nothing.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `tls` when `tls` sets something but the endpoint is
    /// not reached over TLS (a `redis://` URL: write `rediss://`) or the crate lacks its
    /// feature `tls`, and naming the option (`tls.ca_file`, …) whose file cannot be read
    /// or does not hold what it should.
    pub fn with_tls(self, tls: &crate::mq::TlsOptions) -> Result<Self, Error> {
        if !tls.is_set() {
            return Ok(self);
        }
        tls.validate()?;
        self.secured(tls)
    }

    /// [`with_tls`](Self::with_tls) once `tls` is known to set something and be valid.
    #[cfg(feature = "tls")]
    fn secured(self, tls: &crate::mq::TlsOptions) -> Result<Self, Error> {
        let certs = tls.certificates()?;
        let secure = |info: &mut redis::ConnectionInfo| match &mut info.addr {
            redis::ConnectionAddr::TcpTls { insecure, .. } => {
                *insecure = tls.insecure_skip_verify_for_tests;
                Ok(())
            }
            other => Err(Error::InvalidConfig {
                field: "tls",
                reason: format!(
                    "TLS options are set but `{other}` is reached without TLS: write `rediss://` (`{CLUSTER_TLS_SCHEME}` for a cluster)"
                ),
            }),
        };
        let invalid = |e: redis::RedisError| Error::InvalidConfig {
            field: "tls",
            reason: format!("the TLS certificates are not usable: {e}"),
        };
        match self.kind {
            Kind::Single(client) => {
                let mut info = client.get_connection_info().clone();
                secure(&mut info)?;
                Ok(Self::single(
                    redis::Client::build_with_tls(info, certs).map_err(invalid)?,
                ))
            }
            Kind::Cluster {
                seeds, mut infos, ..
            } => {
                infos.iter_mut().try_for_each(secure)?;
                let client = ClusterClient::builder(infos.clone())
                    .retries(0)
                    .certs(certs)
                    .build()
                    .map_err(invalid)?;
                Ok(Self {
                    kind: Kind::Cluster {
                        client,
                        seeds,
                        infos,
                    },
                })
            }
        }
    }

    /// Without the feature `tls`, [`TlsOptions::validate`](crate::mq::TlsOptions::validate)
    /// refused any option already.
    #[cfg(not(feature = "tls"))]
    fn secured(self, _tls: &crate::mq::TlsOptions) -> Result<Self, Error> {
        Ok(self)
    }

    /// One server, through `client`.
    pub fn single(client: redis::Client) -> Self {
        Self {
            kind: Kind::Single(client),
        }
    }

    /// A Redis Cluster reached through the seed `nodes` (e.g. `"redis://127.0.0.1:7000/"`
    /// or `("127.0.0.1", 7000)`); they must share credentials.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `nodes`) when there is no node, a node is a unix
    /// socket, selects a database other than 0, or the nodes' credentials differ;
    /// [`Error::Redis`] when a node does not parse.
    pub fn cluster<T: IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> Result<Self, Error> {
        let infos = nodes
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<Result<Vec<_>, _>>()?;
        let invalid = |reason: String| Error::InvalidConfig {
            field: "nodes",
            reason,
        };
        if infos.is_empty() {
            return Err(invalid(
                "a Redis Cluster needs at least one seed node".into(),
            ));
        }
        let seeds: Vec<String> = infos.iter().map(|i| i.addr.to_string()).collect();
        let kept = infos.clone();
        if let Some(i) = infos.iter().find(|i| i.redis.db != 0) {
            return Err(invalid(format!(
                "node {} selects database {}: a Redis Cluster has database 0 only",
                i.addr, i.redis.db
            )));
        }
        let client = ClusterClient::builder(infos)
            .retries(0)
            .build()
            .map_err(|e| invalid(format!("{}: {e}", seeds.join(","))))?;
        Ok(Self {
            kind: Kind::Cluster {
                client,
                seeds,
                infos: kept,
            },
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster { .. })
    }

    /// The address connection errors name: `host:port` (or the socket path) of the server,
    /// or the cluster's seed nodes, `host:port,host:port` (a single seed as `host:port`).
    pub fn address(&self) -> String {
        match &self.kind {
            Kind::Single(c) => c.get_connection_info().addr.to_string(),
            Kind::Cluster { seeds, .. } => seeds.join(","),
        }
    }

    /// Whether connections use TLS (`rediss://`, `rediss+cluster://`).
    pub(crate) fn is_tls(&self) -> bool {
        let tls = |i: &redis::ConnectionInfo| matches!(i.addr, redis::ConnectionAddr::TcpTls { .. });
        match &self.kind {
            Kind::Single(client) => tls(client.get_connection_info()),
            Kind::Cluster { infos, .. } => infos.iter().any(tls),
        }
    }

    /// The database a one-server endpoint selects (a cluster has only 0).
    pub(crate) fn database(&self) -> i64 {
        match &self.kind {
            Kind::Single(client) => client.get_connection_info().redis.db,
            Kind::Cluster { .. } => 0,
        }
    }

    pub(crate) fn kind(&self) -> &Kind {
        &self.kind
    }
}

impl From<redis::Client> for Endpoint {
    fn from(client: redis::Client) -> Self {
        Self::single(client)
    }
}

/// What [`RedisEnv::try_new`](crate::redis::RedisEnv::try_new) and friends accept as the
/// place to connect: a URL (`&str`, `String`; see [`Endpoint::parse`]), a
/// [`redis::ConnectionInfo`], a [`redis::Client`], or an [`Endpoint`].
pub trait IntoEndpoint {
    /// The endpoint.
    ///
    /// # Errors
    /// As [`Endpoint::parse`].
    fn into_endpoint(self) -> Result<Endpoint, Error>;
}

impl IntoEndpoint for Endpoint {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Ok(self)
    }
}
impl IntoEndpoint for &str {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Endpoint::parse(self)
    }
}
impl IntoEndpoint for &String {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Endpoint::parse(self)
    }
}
impl IntoEndpoint for String {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Endpoint::parse(&self)
    }
}
impl IntoEndpoint for redis::ConnectionInfo {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Ok(Endpoint::single(open_client(self)?))
    }
}
impl IntoEndpoint for redis::Client {
    fn into_endpoint(self) -> Result<Endpoint, Error> {
        Ok(Endpoint::single(self))
    }
}

/// `url` without `scheme` (compared without case), if it starts with it.
fn strip_scheme<'a>(url: &'a str, scheme: &str) -> Option<&'a str> {
    let head = url.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &url[scheme.len()..])
}

/// `url` with its password replaced by `***`, for anything a person or a log may read
/// (errors, logs, the admin CLI's output): the password of the authority
/// (`scheme://user:password@host…`, any scheme, a cluster URL's too) and of a
/// `pass`/`password` query parameter (`redis+unix:///run/redis.sock?pass=…`). A URL without
/// a password comes back unchanged; so does text that is not a URL.
///
/// ```
/// use streaming::mq::redact_url;
/// assert_eq!(redact_url("redis://app:s3cret@db:6379/0"), "redis://app:***@db:6379/0");
/// assert_eq!(redact_url("rediss://:s3cret@db:6380"), "rediss://:***@db:6380");
/// assert_eq!(redact_url("redis+unix:///tmp/r.sock?db=1&pass=s3cret"), "redis+unix:///tmp/r.sock?db=1&pass=***");
/// assert_eq!(redact_url("redis://db:6379"), "redis://db:6379");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    // The last `@` ends the user information (a password may contain `@` unescaped).
    let authority = match authority.rsplit_once('@') {
        Some((user, hosts)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or("");
            format!("{name}:***@{hosts}")
        }
        _ => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") => {
                        format!("{k}=***")
                    }
                    _ => p.to_string(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// The `redis://` URL of each seed node of the cluster URL `url`, whose part after the
/// scheme is `rest`: `[user:password@]host:port[,host:port…][/[0]][?query]`.
fn cluster_node_urls(url: &str, rest: &str, scheme: &str) -> Result<Vec<String>, Error> {
    let invalid = |why: String| Error::InvalidConfig {
        field: "url",
        reason: format!(
            "`{}`: {why}; expected `{CLUSTER_SCHEME}host:port[,host:port…]`",
            redact_url(url)
        ),
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    if !matches!(path, "" | "/" | "/0") {
        return Err(invalid(format!(
            "a Redis Cluster has database 0 only, not `{}`",
            path.trim_start_matches('/')
        )));
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    let mut urls = Vec::new();
    for node in hosts.split(',') {
        let (host, port) = node.rsplit_once(':').unwrap_or((node, "6379"));
        if host.is_empty() {
            return Err(invalid(format!("seed node `{node}` has no host")));
        }
        if port.parse::<u16>().is_err() {
            return Err(invalid(format!(
                "seed node `{node}`: port `{port}` is not a number in 0..=65535"
            )));
        }
        urls.push(format!("{scheme}://{userinfo}{host}:{port}/{query}"));
    }
    Ok(urls)
}

/// A client for the server `info` names (a URL such as `redis://127.0.0.1:6379/`, or a
/// `redis::ConnectionInfo`); nothing is contacted yet.
///
/// # Errors
/// [`Error::InvalidConfig`] (field `url`) when `info` is not a Redis URL the client accepts.
/// [`open_client`] for a URL, with an error that names what is wrong with it.
fn open_url(url: &str) -> Result<redis::Client, Error> {
    redis::Client::open(url).map_err(|e| Error::InvalidConfig {
        field: "url",
        reason: format!(
            "{}; expected a Redis URL such as `redis://127.0.0.1:6379/` (a cluster: \
             `redis+cluster://host:port[,host:port...]`)",
            url_problem(url).unwrap_or_else(|| e.to_string())
        ),
    })
}

/// What is wrong with a one-server URL the client refused, when it is one of the usual
/// mistakes (no scheme, an unknown scheme, a port that is not a number). Never repeats the
/// URL itself: it may hold a password.
fn url_problem(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("the URL has no scheme (write `redis://` before host:port)".to_string());
    };
    match scheme {
        "redis" | "rediss" | "valkey" | "valkeys" => {}
        "redis+unix" | "unix" => return None,
        _ => return Some(format!("unknown scheme `{scheme}://`")),
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once("]:").map(|(_, p)| p),
        None => host_port.rsplit_once(':').map(|(_, p)| p),
    }?;
    (port.parse::<u16>().is_err()).then(|| format!("port `{port}` is not a number in 0..=65535"))
}

fn open_client(info: impl redis::IntoConnectionInfo) -> Result<redis::Client, Error> {
    redis::Client::open(info).map_err(|e| Error::InvalidConfig {
        field: "url",
        reason: format!("{e}; expected a Redis URL such as `redis://127.0.0.1:6379/`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_server_url_that_does_not_parse_says_what_is_wrong() {
        for (url, says) in [
            (
                "redis://127.0.0.1:notaport",
                "port `notaport` is not a number",
            ),
            ("127.0.0.1:16391", "the URL has no scheme"),
            (
                "redis+clutser://127.0.0.1:17001",
                "unknown scheme `redis+clutser://`",
            ),
        ] {
            let e = Endpoint::parse(url).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{url}");
            let text = e.to_string();
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("InvalidClientConfig"), "{url}: {text}");
        }
    }

    fn reason(e: Error) -> String {
        match e {
            Error::InvalidConfig {
                field: "url",
                reason,
            } => reason,
            other => panic!("not an invalid `url`: {other}"),
        }
    }

    #[test]
    fn cluster_urls_name_every_seed_node() {
        assert_eq!(
            cluster_node_urls("", "127.0.0.1:7000,127.0.0.1:7001", "redis").unwrap(),
            ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]
        );
        assert_eq!(
            cluster_node_urls("", "u:pw@a:1,b:2/?protocol=resp3", "redis").unwrap(),
            [
                "redis://u:pw@a:1/?protocol=resp3",
                "redis://u:pw@b:2/?protocol=resp3"
            ]
        );
        assert_eq!(cluster_node_urls("", "h", "redis").unwrap(), ["redis://h:6379/"]);
        let e = Endpoint::parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/").unwrap();
        assert!(e.is_cluster());
        assert_eq!(e.address(), "127.0.0.1:7000,127.0.0.1:7001");
        let e = Endpoint::parse("redis://127.0.0.1:6380/").unwrap();
        assert!(!e.is_cluster());
        assert_eq!(e.address(), "127.0.0.1:6380");
    }

    #[test]
    fn bad_cluster_urls_say_what_is_wrong() {
        let bad = |url: &str| reason(Endpoint::parse(url).unwrap_err());
        let e = bad("redis+cluster://127.0.0.1:7000,:7001");
        assert!(e.contains("`:7001` has no host"), "{e}");
        let e = bad("redis+cluster://127.0.0.1:70000");
        assert!(e.contains("port `70000`"), "{e}");
        let e = bad("redis+cluster://h:1/2");
        assert!(e.contains("database 0 only"), "{e}");
        let e = bad("redis+cluster://");
        assert!(e.contains("has no host"), "{e}");
        let e = bad("redis+cluster://user:secret@h:x");
        assert!(e.contains("user:***@h:x") && !e.contains("secret"), "{e}");
        let e = Endpoint::cluster(Vec::<String>::new()).unwrap_err();
        assert!(
            matches!(e, Error::InvalidConfig { field: "nodes", .. }),
            "{e}"
        );
    }
}
