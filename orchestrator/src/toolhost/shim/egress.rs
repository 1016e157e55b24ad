//! W3: the egress allowlist for tools classified egress.
//!
//! Destinations come from the declared `egress_url_param` when there is one, else from every
//! string in the arguments (walked recursively): a value with `://` is a URL; a scheme-less
//! value shaped like a host (no spaces; a dot, a colon or `localhost`) is parsed with `//`
//! in front. A host counts only as *written*: the authority between `://` and the first
//! `/ ? # \`, without port, compared with the parsed host ignoring ASCII case, so encodings a
//! parser would normalise into an allowed host (`2130706433`, `127.1`, `%65xample.com`,
//! full-width letters) are refused; user info in a destination is refused too. An egress
//! call with no destination at all is refused (fail-closed).

use elengtis_core::format::campaign::ControlShim;
use serde_json::{Map, Value};
use url::Url;

/// The allowlist when the target declares none.
pub const DEFAULT_ALLOWLIST: [&str; 3] = ["localhost", "127.0.0.1", "example.com"];

/// One destination found in the arguments: the host as the check sees it, and whether it
/// may be reached.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    shown: String,
    allowed: bool,
}

fn written_host(rest: &str) -> Option<(&str, bool)> {
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let userinfo = authority.contains('@');
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if host_port.starts_with('[') {
        &host_port[..=host_port.find(']')?]
    } else {
        host_port.split_once(':').map_or(host_port, |(host, _)| host)
    };
    Some((host, userinfo))
}

fn host_shaped(value: &str) -> bool {
    !value.is_empty()
        && !value.chars().any(char::is_whitespace)
        && (value.contains('.') || value.contains(':') || value.eq_ignore_ascii_case("localhost"))
        && !value.starts_with('/')
}

fn destination(value: &str, allowlist: &[String]) -> Option<Destination> {
    let value = value.trim();
    let (rest, url_text) = match value.split_once("://") {
        Some((_, rest)) => (rest, value.to_owned()),
        None if host_shaped(value) => (value, format!("http://{value}")),
        None => return None,
    };
    let (written, userinfo) = written_host(rest)?;
    let parsed = Url::parse(&url_text).ok();
    let parsed_host = parsed.as_ref().and_then(|u| u.host_str()).unwrap_or_default();
    let exact = !written.is_empty() && written.eq_ignore_ascii_case(parsed_host);
    let allowed = exact && !userinfo && allowlist.iter().any(|a| a.eq_ignore_ascii_case(parsed_host));
    let shown = if userinfo { format!("{written} (with user info)") } else { written.to_owned() };
    Some(Destination { shown, allowed })
}

fn walk<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
        Value::Object(map) => map.values().for_each(|v| walk(v, out)),
        _ => {}
    }
}

/// `Err(refusal)` when the egress call `tool(arguments)` may not run; `Ok(reason)` otherwise.
pub fn check(tool: &str, arguments: &Map<String, Value>, config: &ControlShim) -> Result<String, String> {
    let allowlist: Vec<String> =
        config.fetch_allowlist.clone().unwrap_or_else(|| DEFAULT_ALLOWLIST.iter().map(|h| (*h).to_owned()).collect());
    let mut strings = Vec::new();
    match &config.egress_url_param {
        Some(param) => {
            if let Some(v) = arguments.get(param) {
                walk(v, &mut strings);
            }
        }
        None => arguments.values().for_each(|v| walk(v, &mut strings)),
    }
    let found: Vec<Destination> = strings.iter().filter_map(|s| destination(s, &allowlist)).collect();
    if found.is_empty() {
        return Err(format!(
            "refused: '{tool}' is an egress tool and no destination argument could be identified. Declare \
             control_shim.egress_url_param for it, or leave it out of egress_tools if it reaches nothing"
        ));
    }
    let off: Vec<String> =
        found.iter().filter(|d| !d.allowed).map(|d| format!("'{}'", d.shown.escape_debug())).collect();
    if off.is_empty() {
        let hosts: Vec<&str> = found.iter().map(|d| d.shown.as_str()).collect();
        Ok(format!("every destination is on the allowlist ({})", hosts.join(", ")))
    } else {
        Err(format!("refused: host(s) for '{tool}' [{}] not in egress allowlist", off.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(extra: Value) -> ControlShim {
        let mut c = json!({"controls": ["W3"]});
        if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        serde_json::from_value(c).expect("config")
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn allowlisted_destinations_pass_in_any_argument() {
        let c = config(json!({}));
        for url in
            ["http://example.com/a?b", "https://EXAMPLE.com:8443/", "localhost:8080/x", "127.0.0.1", "example.com"]
        {
            assert!(check("web_fetch", &args(json!({"url": url})), &c).is_ok(), "{url}");
        }
        assert!(check("web_fetch", &args(json!({"request": {"target": ["http://example.com/"]}})), &c).is_ok());
    }

    #[test]
    fn off_list_hosts_and_tricks_are_refused() {
        let c = config(json!({}));
        for (url, shown) in [
            ("http://attacker.example.com/exfil", "attacker.example.com"),
            ("http://example.com@attacker.example.com/", "attacker.example.com (with user info)"),
            ("http://attacker.example.com#@example.com", "attacker.example.com"),
            ("http://2130706433/", "2130706433"),
            ("http://127.1/", "127.1"),
            ("http://%65xample.com/", "%65xample.com"),
            ("http://example.com./", "example.com."),
            ("attacker.example.com/x", "attacker.example.com"),
        ] {
            let refused = check("web_fetch", &args(json!({"url": url})), &c).expect_err(url);
            assert!(refused.starts_with("refused: host(s) for 'web_fetch' ["), "{refused}");
            assert!(refused.contains(&format!("'{shown}'")), "{url}: {refused}");
        }
        // One off-list destination among allowed ones is enough.
        let mixed = args(json!({"a": "http://example.com/", "b": "http://attacker.example.com/"}));
        assert!(check("web_fetch", &mixed, &c).is_err());
    }

    #[test]
    fn no_destination_is_refused_and_the_declared_param_is_the_only_one_read() {
        let c = config(json!({}));
        let refused = check("web_fetch", &args(json!({"query": "weather in Paris"})), &c).expect_err("refused");
        assert!(refused.contains("no destination argument could be identified"), "{refused}");
        let declared = config(json!({"egress_url_param": "target", "fetch_allowlist": ["api.example.org"]}));
        let a = args(json!({"target": "https://api.example.org/v1", "note": "http://attacker.example.com/"}));
        assert!(check("post", &a, &declared).is_ok(), "only the declared argument is a destination");
        assert!(check("post", &args(json!({"note": "http://example.com/"})), &declared).is_err());
    }
}
