//! W3: `web_fetch` reaches only hosts on the allowlist.
//!
//! The URL is parsed once (WHATWG rules, the `url` crate) and the request goes to exactly the
//! host that parse yields, so the check and the request cannot disagree. The check is then
//! stricter than the parse: the scheme must be http or https, the URL must carry no user
//! info, and the host as *written* (the authority between `://` and the first `/ ? # \`,
//! minus user info and port) must equal, ignoring ASCII case, both the parsed host and an
//! allowlist entry. So the encodings a parser would normalise into an allowed host
//! (`2130706433`, `0x7f.1`, `127.1`, `%65xample.com`, full-width letters, a tab inside the
//! name) are refused rather than trusted, and a trailing dot, an IDN look-alike or an IPv6
//! spelling of an allowed address is simply another host. Ports are not restricted.

use url::Url;

/// Why a fetch URL is refused (the text the model sees).
pub fn check(input: &str, allowlist: &[String]) -> Result<Url, String> {
    let url =
        Url::parse(input).map_err(|e| format!("refused: '{}' is not an absolute URL ({e})", input.escape_debug()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("refused: scheme '{}' not allowed (http or https only)", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("refused: a fetch URL must not carry user info".to_owned());
    }
    let parsed = url.host_str().unwrap_or_default();
    let written = written_host(input);
    let shown = written.unwrap_or(parsed);
    let exact = written.is_some_and(|w| w.eq_ignore_ascii_case(parsed));
    if exact && allowlist.iter().any(|allowed| allowed.eq_ignore_ascii_case(parsed)) {
        Ok(url)
    } else {
        Err(format!("refused: host '{}' not in fetch allowlist", shown.escape_debug()))
    }
}

/// The host exactly as written in `input`: after `scheme://`, before the first `/ ? # \`,
/// after the last `@`, before the port. `None` without `://`.
fn written_host(input: &str) -> Option<&str> {
    let (_, rest) = input.trim().split_once("://")?;
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if host_port.starts_with('[') {
        let close = host_port.find(']')?;
        Some(&host_port[..=close])
    } else {
        Some(host_port.split_once(':').map_or(host_port, |(host, _)| host))
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    fn allowlist() -> Vec<String> {
        ["localhost", "127.0.0.1", "example.com"].map(str::to_owned).to_vec()
    }

    #[test]
    fn exact_allowlisted_hosts_pass_with_any_case_port_path_and_query() {
        for url in [
            "http://example.com/",
            "https://example.com/a/b?q=1#frag",
            "http://EXAMPLE.COM/",
            "http://Example.Com:8080/x",
            "http://127.0.0.1:9/",
            "http://localhost/",
            "http://example.com",
            "http://example.com?x",
        ] {
            let parsed = check(url, &allowlist()).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert!(matches!(parsed.host_str(), Some("example.com" | "127.0.0.1" | "localhost")), "{url}");
        }
    }

    #[test]
    fn tricks_are_refused() {
        for (url, host) in [
            ("http://attacker.example.com/exfil", "attacker.example.com"),
            ("http://ATTACKER.example.com/", "ATTACKER.example.com"),
            ("http://attacker.example.com./", "attacker.example.com."),
            ("http://example.com./", "example.com."),
            ("http://example.com.attacker.example.com/", "example.com.attacker.example.com"),
            ("http://attacker.example.com:80/", "attacker.example.com"),
            ("http://attacker.example.com#@example.com/", "attacker.example.com"),
            ("http://attacker.example.com\\@example.com/", "attacker.example.com"),
            ("http://2130706433/", "2130706433"),
            ("http://0x7f.1/", "0x7f.1"),
            ("http://0x7f000001/", "0x7f000001"),
            ("http://0177.0.0.1/", "0177.0.0.1"),
            ("http://127.1/", "127.1"),
            ("http://127.0.0.1.nip.io/", "127.0.0.1.nip.io"),
            ("http://[::1]/", "[::1]"),
            ("http://[::ffff:127.0.0.1]/", "[::ffff:127.0.0.1]"),
            ("http://[::ffff:7f00:1]/", "[::ffff:7f00:1]"),
            ("http://%65xample.com/", "%65xample.com"),
            ("http://\u{ff45}xample.com/", "\u{ff45}xample.com"),
            ("http://\u{0435}xample.com/", "\u{0435}xample.com"),
            ("http://exa\tmple.com/", "exa\\tmple.com"),
            ("http://localhost.attacker.example.com/", "localhost.attacker.example.com"),
        ] {
            assert_eq!(
                check(url, &allowlist()).map(|u| u.to_string()),
                Err(format!("refused: host '{host}' not in fetch allowlist")),
                "{url}"
            );
        }
    }

    #[test]
    fn scheme_tricks_are_refused() {
        for url in ["http:/attacker.example.com/", "http:attacker.example.com/", "http:\\\\attacker.example.com\\"] {
            let refusal = check(url, &allowlist()).expect_err(url);
            assert!(refusal.contains("not in fetch allowlist"), "{url}: {refusal}");
        }
        // `http:example.com` parses to host example.com, but nothing was written as a host.
        assert!(check("http:example.com/", &allowlist()).is_err());
        for (url, scheme) in
            [("ftp://example.com/", "ftp"), ("file:///etc/passwd", "file"), ("gopher://example.com/", "gopher")]
        {
            assert_eq!(
                check(url, &allowlist()).err(),
                Some(format!("refused: scheme '{scheme}' not allowed (http or https only)"))
            );
        }
        assert!(check("data:text/plain,hi", &allowlist()).is_err());
        assert!(check("javascript:alert(1)", &allowlist()).is_err());
        assert!(check("//attacker.example.com/", &allowlist()).expect_err("relative").contains("not an absolute URL"));
        assert!(check("", &allowlist()).is_err());
    }

    #[test]
    fn user_info_is_refused() {
        for url in [
            "http://example.com@attacker.example.com/",
            "http://attacker.example.com@example.com/",
            "http://user:pass@example.com/",
            "http://example.com:80@attacker.example.com/",
        ] {
            let refusal = check(url, &allowlist()).expect_err(url);
            assert!(refusal.starts_with("refused: "), "{url}: {refusal}");
        }
    }
}
