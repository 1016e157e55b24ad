use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap as AxumHeaders, StatusCode, header};
use axum::response::{IntoResponse, Redirect};
use axum::routing::{any, get};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const SECRET: &str = "s3cr3t-TOKEN-4f9a";

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind test server");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    addr
}

/// A raw HTTP/1.1 server that answers every connection with `head`, then
/// `body_start`, then stalls for 5 s before closing.
async fn serve_stalling(head: &'static str, body_start: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind raw server");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = [0_u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body_start.as_bytes()).await;
                let _ = socket.flush().await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    addr
}

/// An address where nothing listens.
async fn refused_addr() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    addr
}

fn client() -> HttpClient {
    HttpClient::new(HttpLimits::default()).expect("client")
}

fn client_with(timeout: Duration, max_body_bytes: usize) -> HttpClient {
    HttpClient::new(HttpLimits { timeout, max_body_bytes }).expect("client")
}

fn get_spec(url: String) -> HttpRequestSpec {
    HttpRequestSpec { method: Method::Get, url, headers: Vec::new(), json: None }
}

async fn echo(method: axum::http::Method, headers: AxumHeaders, body: Bytes) -> impl IntoResponse {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    axum::Json(json!({
        "method": method.as_str(),
        "content_type": header("content-type"),
        "api_key": header("x-api-key"),
        "json": parsed,
        "body_bytes": body.len(),
    }))
}

fn echo_router() -> Router {
    Router::new().route("/echo", any(echo))
}

#[tokio::test]
async fn json_body_round_trips_with_json_content_type() {
    let addr = serve(echo_router()).await;
    let sent = json!({"note": "hello", "n": [1, 2, 3], "nested": {"ok": true}});
    let spec = HttpRequestSpec {
        method: Method::Post,
        url: format!("http://{addr}/echo"),
        headers: Vec::new(),
        json: Some(sent.clone()),
    };
    let record = client().execute(&spec).await.expect("request");
    assert_eq!(record.status, 200);
    assert!(!record.truncated);
    assert_eq!(record.body["method"], "POST");
    assert_eq!(record.body["content_type"], "application/json");
    assert_eq!(record.body["json"], sent);
}

#[tokio::test]
async fn request_without_json_sends_no_body() {
    let addr = serve(echo_router()).await;
    let record = client().execute(&get_spec(format!("http://{addr}/echo"))).await.expect("request");
    assert_eq!(record.body["method"], "GET");
    assert_eq!(record.body["content_type"], Value::Null);
    assert_eq!(record.body["body_bytes"], 0);
}

#[tokio::test]
async fn every_method_is_sent_as_named() {
    let addr = serve(echo_router()).await;
    let client = client();
    for method in [Method::Get, Method::Post, Method::Put, Method::Patch, Method::Delete] {
        let spec = HttpRequestSpec {
            method,
            url: format!("http://{addr}/echo"),
            headers: Vec::new(),
            json: Some(json!({"m": method.as_str()})),
        };
        let record = client.execute(&spec).await.expect("request");
        assert_eq!(record.body["method"], method.as_str());
        assert_eq!(record.body["json"]["m"], method.as_str());
    }
}

#[tokio::test]
async fn text_body_is_recorded_as_a_string() {
    let addr = serve(Router::new().route("/text", get(|| async { "plain words, not json" }))).await;
    let record = client().execute(&get_spec(format!("http://{addr}/text"))).await.expect("request");
    assert_eq!(
        record,
        HttpResponseRecord { status: 200, body: Value::String("plain words, not json".to_owned()), truncated: false }
    );
}

#[tokio::test]
async fn empty_body_is_an_empty_string() {
    let addr = serve(Router::new().route("/empty", get(|| async { StatusCode::NO_CONTENT }))).await;
    let record = client().execute(&get_spec(format!("http://{addr}/empty"))).await.expect("request");
    assert_eq!(record.status, 204);
    assert_eq!(record.body, Value::String(String::new()));
    assert!(!record.truncated);
}

#[tokio::test]
async fn error_status_is_recorded_not_an_error() {
    let router = Router::new()
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, axum::Json(json!({"error": "no such note"}))) }))
        .route("/broken", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }));
    let addr = serve(router).await;
    let client = client();
    let missing = client.execute(&get_spec(format!("http://{addr}/missing"))).await.expect("404 is data");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, json!({"error": "no such note"}));
    let broken = client.execute(&get_spec(format!("http://{addr}/broken"))).await.expect("500 is data");
    assert_eq!(broken.status, 500);
    assert_eq!(broken.body, "boom");
}

#[tokio::test]
async fn redirect_is_returned_not_followed() {
    let hits = Arc::new(AtomicUsize::new(0));
    let target_hits = Arc::clone(&hits);
    let router = Router::new()
        .route("/moved", get(|| async { Redirect::to("/target") }))
        .route("/found", get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/target")], "see /target") }))
        .route(
            "/target",
            get(move || {
                target_hits.fetch_add(1, Ordering::SeqCst);
                async { "reached" }
            }),
        );
    let addr = serve(router).await;
    let record = client().execute(&get_spec(format!("http://{addr}/found"))).await.expect("request");
    assert_eq!(record.status, 302);
    assert_eq!(record.body, "see /target");
    let record = client().execute(&get_spec(format!("http://{addr}/moved"))).await.expect("request");
    assert_eq!(record.status, 303);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect must not be followed");
}

#[tokio::test]
async fn body_over_the_cap_is_truncated_and_falls_back_to_text() {
    let big = json!({"items": vec!["0123456789"; 100]});
    let big_text = big.to_string();
    let router = Router::new().route("/big", get(move || async move { axum::Json(big) }));
    let addr = serve(router).await;
    let record = client_with(Duration::from_secs(10), 50)
        .execute(&get_spec(format!("http://{addr}/big")))
        .await
        .expect("request");
    assert_eq!(record.status, 200);
    assert!(record.truncated);
    assert_eq!(record.body, Value::String(big_text[..50].to_owned()));
}

#[tokio::test]
async fn capped_prefix_that_parses_is_recorded_as_json() {
    let addr = serve(Router::new().route("/digits", get(|| async { "1234567890" }))).await;
    let record = client_with(Duration::from_secs(10), 3)
        .execute(&get_spec(format!("http://{addr}/digits")))
        .await
        .expect("request");
    assert_eq!(record.body, json!(123));
    assert!(record.truncated, "the flag tells the prefix apart from the whole body");
}

#[tokio::test]
async fn body_exactly_at_the_cap_is_not_truncated() {
    let addr = serve(Router::new().route("/exact", get(|| async { r#"{"ok":true}"# }))).await;
    let record = client_with(Duration::from_secs(10), 11)
        .execute(&get_spec(format!("http://{addr}/exact")))
        .await
        .expect("request");
    assert_eq!(record.body, json!({"ok": true}));
    assert!(!record.truncated);
}

#[tokio::test]
async fn huge_body_stops_at_the_cap_quickly() {
    let huge = "x".repeat(20 * 1024 * 1024);
    let router = Router::new().route("/huge", get(move || async move { huge }));
    let addr = serve(router).await;
    let started = Instant::now();
    let record = client_with(Duration::from_secs(10), 1000)
        .execute(&get_spec(format!("http://{addr}/huge")))
        .await
        .expect("request");
    assert!(record.truncated);
    assert_eq!(record.body, Value::String("x".repeat(1000)));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn character_split_by_the_cap_is_dropped() {
    let addr = serve(Router::new().route("/accents", get(|| async { "ééé" }))).await;
    let record = client_with(Duration::from_secs(10), 3)
        .execute(&get_spec(format!("http://{addr}/accents")))
        .await
        .expect("request");
    assert!(record.truncated);
    assert_eq!(record.body, "é");
}

#[tokio::test]
async fn invalid_utf8_is_decoded_lossily() {
    let router = Router::new().route("/bytes", get(|| async { Bytes::from_static(b"ok \xff\xfe end") }));
    let addr = serve(router).await;
    let record = client().execute(&get_spec(format!("http://{addr}/bytes"))).await.expect("request");
    assert_eq!(record.body, "ok \u{fffd}\u{fffd} end");
}

#[tokio::test]
async fn slow_server_times_out_within_the_deadline() {
    let router = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "too late"
        }),
    );
    let addr = serve(router).await;
    let url = format!("http://{addr}/slow");
    let started = Instant::now();
    let error =
        client_with(Duration::from_millis(300), 1000).execute(&get_spec(url.clone())).await.expect_err("must time out");
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(error.kind, HttpErrorKind::Timeout { after: Duration::from_millis(300) });
    assert_eq!(error.kind_name(), "timeout");
    assert_eq!(error.to_string(), format!("failed to complete GET {url}: no complete answer within 300 ms"));
}

#[tokio::test]
async fn stalled_body_times_out_too() {
    let addr = serve_stalling(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n",
        "only a few bytes",
    )
    .await;
    let started = Instant::now();
    let error = client_with(Duration::from_millis(300), 1000)
        .execute(&get_spec(format!("http://{addr}/stall")))
        .await
        .expect_err("must time out");
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(error.kind_name(), "timeout");
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let addr = refused_addr().await;
    let url = format!("http://{addr}/anything");
    let error = client().execute(&get_spec(url.clone())).await.expect_err("nothing listens");
    assert_eq!(error.kind_name(), "connect");
    assert_eq!(error.method, Method::Get);
    assert_eq!(error.url, url);
    assert_eq!(error.to_string(), format!("failed to send GET {url}: connection refused"));
}

#[tokio::test]
async fn connection_closed_before_an_answer_is_a_client_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0_u8; 4096];
            let _ = socket.read(&mut request).await;
            drop(socket);
        }
    });
    let error = client().execute(&get_spec(format!("http://{addr}/hangup"))).await.expect_err("no answer");
    assert_eq!(error.kind_name(), "client", "{error}");
    assert!(error.to_string().starts_with("failed to send GET "), "{error}");
}

#[tokio::test]
async fn body_cut_short_is_a_body_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0_u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort").await;
            drop(socket);
        }
    });
    let error = client().execute(&get_spec(format!("http://{addr}/short"))).await.expect_err("body incomplete");
    assert_eq!(error.kind_name(), "body", "{error}");
    assert!(error.to_string().starts_with("failed to read the response to GET "), "{error}");
}

#[tokio::test]
async fn header_secret_is_sent_but_never_shown() {
    let addr = serve(echo_router()).await;
    let spec = HttpRequestSpec {
        method: Method::Post,
        url: format!("http://{addr}/echo"),
        headers: vec![("X-Api-Key".to_owned(), SecretValue::new(SECRET))],
        json: Some(json!({"q": 1})),
    };
    let client = client();
    let record = client.execute(&spec).await.expect("request");
    assert_eq!(record.body["api_key"], SECRET, "the server must receive the secret");

    let debug = format!("{spec:?} {client:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(debug.contains(REDACTED), "{debug}");

    let refused = HttpRequestSpec { url: format!("http://{}/echo", refused_addr().await), ..spec.clone() };
    let error = client.execute(&refused).await.expect_err("refused");
    let bad_value = HttpRequestSpec {
        headers: vec![("X-Api-Key".to_owned(), SecretValue::new(format!("{SECRET}\r\nx: y")))],
        ..spec.clone()
    };
    let bad = client.execute(&bad_value).await.expect_err("bad value");
    assert_eq!(bad.kind_name(), "invalid_header");
    assert_eq!(
        bad.kind,
        HttpErrorKind::InvalidHeader {
            name: "X-Api-Key".to_owned(),
            reason: "the value contains characters not allowed in a header",
        }
    );

    let input = spec.redacted_input().to_string();
    let shown = format!("{error} {error:?} {bad} {bad:?} {input}");
    assert!(!shown.contains(SECRET), "{shown}");
}

#[test]
fn secret_value_is_redacted_everywhere_but_expose() {
    let secret = SecretValue::from(SECRET);
    assert_eq!(format!("{secret:?}"), REDACTED);
    assert_eq!(secret.to_string(), REDACTED);
    assert_eq!(serde_json::to_string(&secret).expect("serialize"), format!("\"{REDACTED}\""));
    assert_eq!(secret.expose(), SECRET);
}

#[tokio::test]
async fn url_scheme_other_than_http_is_rejected() {
    for (url, reason) in [
        ("ftp://example.com/notes", "scheme \"ftp\" is not http or https"),
        ("file:///etc/passwd", "scheme \"file\" is not http or https"),
        ("not a url", "relative URL without a base"),
    ] {
        let error = client().execute(&get_spec(url.to_owned())).await.expect_err("invalid url");
        assert_eq!(error.kind_name(), "invalid_url");
        assert_eq!(error.kind, HttpErrorKind::InvalidUrl { reason: reason.to_owned() });
        assert_eq!(error.to_string(), format!("failed to prepare GET {url}: invalid url: {reason}"));
    }
}

#[tokio::test]
async fn invalid_header_name_is_rejected_before_sending() {
    let addr = refused_addr().await;
    let spec = HttpRequestSpec {
        method: Method::Delete,
        url: format!("http://{addr}/x"),
        headers: vec![("bad header".to_owned(), SecretValue::new(SECRET))],
        json: None,
    };
    let error = client().execute(&spec).await.expect_err("invalid header");
    assert_eq!(error.kind_name(), "invalid_header");
    assert_eq!(
        error.to_string(),
        format!("failed to prepare DELETE {}: invalid header \"bad header\": not a valid HTTP header name", spec.url)
    );
    assert!(!format!("{error:?}").contains(SECRET));
    assert!(is_valid_header_name("X-Api-Key"));
    assert!(!is_valid_header_name("bad header"));
    assert!(!is_valid_header_name(""));
}

#[test]
fn redacted_input_shows_names_not_values() {
    let input = redacted_input(
        Method::Patch,
        "http://{binding: api}/notes",
        ["Authorization", "X-Trace"],
        Some(&json!({"title": "t"})),
    );
    assert_eq!(
        input,
        json!({
            "method": "PATCH",
            "url": "http://{binding: api}/notes",
            "headers": {"Authorization": REDACTED, "X-Trace": REDACTED},
            "json": {"title": "t"},
        })
    );
    let no_body = redacted_input(Method::Get, "http://h/", Vec::<String>::new(), None);
    assert_eq!(no_body, json!({"method": "GET", "url": "http://h/", "headers": {}, "json": null}));
}

#[test]
fn limits_default_to_the_original_tool() {
    let limits = HttpLimits::default();
    assert_eq!(limits.timeout, Duration::from_secs(10));
    assert_eq!(limits.max_body_bytes, 100_000);
    assert_eq!(HttpErrorKind::Timeout { after: limits.timeout }.to_string(), "no complete answer within 10 s");
}

#[test]
fn zero_timeout_is_refused() {
    let error = HttpClient::new(HttpLimits { timeout: Duration::ZERO, max_body_bytes: 10 }).expect_err("zero timeout");
    assert_eq!(error.to_string(), "failed to build the http client: the timeout must be longer than zero");
}

#[test]
fn method_and_record_serialize_as_the_original() {
    assert_eq!(serde_json::from_str::<Method>("\"PATCH\"").expect("method"), Method::Patch);
    assert!(serde_json::from_str::<Method>("\"patch\"").is_err());
    assert_eq!(Method::Delete.to_string(), "DELETE");
    let record = HttpResponseRecord { status: 201, body: json!({"id": 7}), truncated: false };
    assert_eq!(
        serde_json::to_string(&record).expect("serialize"),
        r#"{"status":201,"body":{"id":7},"truncated":false}"#
    );
}

#[test]
fn split_character_trimming_keeps_whole_characters() {
    assert_eq!(without_split_char(b"abc"), b"abc");
    assert_eq!(without_split_char("é".as_bytes()), "é".as_bytes());
    assert_eq!(without_split_char(&"aé".as_bytes()[..2]), b"a");
    assert_eq!(without_split_char(&"a😀".as_bytes()[..4]), b"a");
    assert_eq!(without_split_char(b"a\xff"), b"a\xff");
    assert_eq!(without_split_char(b""), b"");
}
