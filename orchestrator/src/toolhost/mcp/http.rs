//! Streamable HTTP targets: an externally managed server (or a container reached through its
//! trial network or the relay); a trial owns only a new client session, and the header
//! secrets it uses are never written anywhere.

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::{CloseReport, HttpLaunch, Limits, OpenFailure, Session, TargetError, client_config, server_info};

/// Open a new client session with an HTTP target.
pub async fn open_http(launch: &HttpLaunch, limits: Limits) -> Result<Session, OpenFailure> {
    use reqwest::header::{HeaderName, HeaderValue};
    let fail = |error| OpenFailure { error, closed: CloseReport::default() };
    let mut config = StreamableHttpClientTransportConfig::with_uri(launch.url.clone());
    for (name, value) in &launch.headers {
        let header = || TargetError::Header { name: name.clone() };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| fail(header()))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| fail(header()))?;
        value.set_sensitive(true);
        config.custom_headers.insert(name, value);
    }
    let builder = || {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(limits.connect)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some((host, addr)) = &launch.resolve {
            builder = builder.resolve(host, *addr);
        }
        builder
    };
    // Without system CA certificates (a FROM-scratch image) plain http still works.
    let http = elengtis_verifiers::build_client(builder).map_err(|e| fail(TargetError::Client(e)))?;
    let transport = StreamableHttpClientTransport::with_client(http, config);
    match tokio::time::timeout(limits.connect, client_config().serve(transport)).await {
        Ok(Ok(client)) => {
            let server = server_info(&client);
            Ok(Session {
                client: Some(client),
                child: None,
                stderr: None,
                limits,
                server,
                frames: None,
                broken: Default::default(),
            })
        }
        Ok(Err(e)) => Err(fail(TargetError::Init(e.to_string()))),
        Err(_) => Err(fail(TargetError::InitTimeout(limits.connect, String::new()))),
    }
}
