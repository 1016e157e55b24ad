//! YAML 1.1 scalar resolution, as PyYAML's `SafeLoader` does it, and explicit tags.
//!
//! A plain scalar is tried as null, boolean, float and integer with PyYAML's implicit
//! resolver patterns, in that order, and is otherwise a string; quoted and block scalars
//! are strings. The patterns and constructors follow PyYAML's: `yes`/`no`/`on`/`off`
//! booleans, octal with a leading `0`, `0x` hex, `0b` binary, base-60 (`1:30`), floats that
//! need a `.`, `.inf` and `.nan`. Timestamps are not resolved (they stay strings). An
//! explicit core-schema tag (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`) converts the
//! text as PyYAML does; any other tag, and a merge key `<<`, is an error. The module
//! documentation of [`super`] lists the accepted spellings and the deviations.

use saphyr_parser::{ScalarStyle, Tag};

use super::{Mark, NodeKind, YamlError};

const CORE_PREFIX: &str = "tag:yaml.org,2002:";

/// The suffix of a YAML core-schema tag (`str` for `!!str`), if `tag` is one.
pub(super) fn core_suffix(tag: &Tag) -> Option<&str> {
    if tag.handle == CORE_PREFIX {
        Some(&tag.suffix)
    } else if tag.handle.is_empty() {
        tag.suffix.strip_prefix(CORE_PREFIX)
    } else {
        None
    }
}

/// A tag as it would be written in the file.
pub(super) fn tag_text(tag: &Tag) -> String {
    if let Some(suffix) = core_suffix(tag) {
        format!("!!{suffix}")
    } else if tag.handle == "!" {
        format!("!{}", tag.suffix)
    } else if tag.handle.is_empty() {
        if tag.suffix == "!" { "!".to_owned() } else { format!("!<{}>", tag.suffix) }
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

fn merge_error(mark: Mark) -> YamlError {
    YamlError::new(mark, "merge keys are not supported; expected the merged keys written out instead of `<<`")
}

/// Resolves a scalar like PyYAML's `SafeLoader`.
pub(super) fn resolve_scalar(
    value: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    mark: Mark,
) -> Result<NodeKind, YamlError> {
    if let Some(tag) = tag {
        return resolve_tagged(value, tag, mark);
    }
    if style != ScalarStyle::Plain {
        return Ok(NodeKind::Str(value.to_owned()));
    }
    if value == "<<" {
        return Err(merge_error(mark));
    }
    if is_null(value) {
        return Ok(NodeKind::Null);
    }
    if let Some(b) = plain_bool(value) {
        return Ok(NodeKind::Bool(b));
    }
    if is_float(value) {
        return match construct_float(value) {
            Some(f) => Ok(NodeKind::Float(f)),
            None => Err(YamlError::new(mark, format!("invalid number `{value}`; expected a float"))),
        };
    }
    if is_int(value) {
        return construct_int(value).map(NodeKind::Int).map_err(|e| e.into_yaml(value, mark));
    }
    Ok(NodeKind::Str(value.to_owned()))
}

fn resolve_tagged(value: &str, tag: &Tag, mark: Mark) -> Result<NodeKind, YamlError> {
    match core_suffix(tag) {
        Some("str") => Ok(NodeKind::Str(value.to_owned())),
        Some("int") => construct_int(value).map(NodeKind::Int).map_err(|e| e.into_yaml(value, mark)),
        Some("float") => construct_float(value)
            .map(NodeKind::Float)
            .ok_or_else(|| YamlError::new(mark, format!("invalid `!!float` value `{value}`; expected a number"))),
        Some("bool") => match value.to_lowercase().as_str() {
            "yes" | "true" | "on" => Ok(NodeKind::Bool(true)),
            "no" | "false" | "off" => Ok(NodeKind::Bool(false)),
            _ => Err(YamlError::new(
                mark,
                format!("invalid `!!bool` value `{value}`; expected true, false, yes, no, on or off"),
            )),
        },
        Some("null") => {
            if is_null(value) {
                Ok(NodeKind::Null)
            } else {
                Err(YamlError::new(mark, format!("invalid `!!null` value `{value}`; expected null, ~ or nothing")))
            }
        }
        Some("merge") => Err(merge_error(mark)),
        _ => Err(YamlError::new(
            mark,
            format!(
                "unsupported tag `{}`; expected no tag or one of !!str, !!int, !!float, !!bool, !!null",
                tag_text(tag)
            ),
        )),
    }
}

fn is_null(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

fn plain_bool(value: &str) -> Option<bool> {
    match value {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn strip_sign(s: &str) -> (bool, &str) {
    match s.strip_prefix(['-', '+']) {
        Some(rest) => (true, rest),
        None => (false, s),
    }
}

/// `[0-5]?[0-9]`, one base-60 digit after a `:`.
fn is_base60_digit(part: &str) -> bool {
    match part.as_bytes() {
        [d] => d.is_ascii_digit(),
        [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
        _ => false,
    }
}

/// PyYAML's implicit int pattern.
fn is_int(value: &str) -> bool {
    let (_, s) = strip_sign(value);
    if let Some(rest) = s.strip_prefix("0b") {
        return !rest.is_empty() && rest.chars().all(|c| matches!(c, '0' | '1' | '_'));
    }
    if let Some(rest) = s.strip_prefix("0x") {
        return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '_');
    }
    if s == "0" {
        return true;
    }
    if let Some(rest) = s.strip_prefix('0') {
        return !rest.is_empty() && rest.chars().all(|c| matches!(c, '0'..='7' | '_'));
    }
    let mut parts = s.split(':');
    let first = parts.next().unwrap_or_default();
    let mut chars = first.chars();
    if !matches!(chars.next(), Some('1'..='9')) || !chars.all(|c| c.is_ascii_digit() || c == '_') {
        return false;
    }
    parts.all(is_base60_digit)
}

/// Consumes `[0-9_]*` from the front of `s`.
fn skip_digits_underscores(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_')
}

/// Whether `s` is empty or an exponent `[eE][-+][0-9]+`.
fn is_opt_exponent(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let Some(rest) = s.strip_prefix(['e', 'E']) else {
        return false;
    };
    let Some(digits) = rest.strip_prefix(['-', '+']) else {
        return false;
    };
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// PyYAML's implicit float pattern.
fn is_float(value: &str) -> bool {
    if matches!(value, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let (signed, s) = strip_sign(value);
    if matches!(s, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if let Some(rest) = s.strip_prefix('.') {
        // `\.[0-9][0-9_]*([eE][-+][0-9]+)?`, unsigned only
        return !signed
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && is_opt_exponent(skip_digits_underscores(rest));
    }
    if !s.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let rest = skip_digits_underscores(s);
    if let Some(fraction) = rest.strip_prefix('.') {
        // `[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?`
        return is_opt_exponent(skip_digits_underscores(fraction));
    }
    if rest.starts_with(':') {
        // `[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`
        let Some((base60, fraction)) = rest.split_once('.') else {
            return false;
        };
        let mut parts = base60.split(':');
        let _empty_before_first_colon = parts.next();
        return parts.all(is_base60_digit) && fraction.chars().all(|c| c.is_ascii_digit() || c == '_');
    }
    false
}

/// Why an integer could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntError {
    Invalid,
    Overflow,
}

impl IntError {
    fn into_yaml(self, value: &str, mark: Mark) -> YamlError {
        match self {
            IntError::Invalid => YamlError::new(
                mark,
                format!("invalid integer `{value}`; expected digits such as 42, 0x2a, 0b101010 or 052"),
            ),
            IntError::Overflow => YamlError::new(
                mark,
                format!(
                    "integer `{value}` is out of range; expected a value from {} to {} (quote it to use it as text)",
                    i64::MIN,
                    i64::MAX
                ),
            ),
        }
    }
}

fn parse_radix(digits: &str, radix: u32) -> Result<i128, IntError> {
    if digits.is_empty() {
        return Err(IntError::Invalid);
    }
    let mut value: i128 = 0;
    for c in digits.chars() {
        let digit = c.to_digit(radix).ok_or(IntError::Invalid)?;
        value = value
            .checked_mul(i128::from(radix))
            .and_then(|v| v.checked_add(i128::from(digit)))
            .ok_or(IntError::Overflow)?;
    }
    Ok(value)
}

/// PyYAML's `construct_yaml_int`, limited to `i64`.
fn construct_int(value: &str) -> Result<i64, IntError> {
    let cleaned = value.replace('_', "");
    let negative = cleaned.starts_with('-');
    let (_, s) = strip_sign(&cleaned);
    let magnitude = if s == "0" {
        0
    } else if let Some(bin) = s.strip_prefix("0b") {
        parse_radix(bin, 2)?
    } else if let Some(hex) = s.strip_prefix("0x") {
        parse_radix(hex, 16)?
    } else if s.starts_with('0') {
        parse_radix(s, 8)?
    } else if s.contains(':') {
        let mut total: i128 = 0;
        for part in s.split(':') {
            let part = parse_radix(part, 10)?;
            total = total.checked_mul(60).and_then(|t| t.checked_add(part)).ok_or(IntError::Overflow)?;
        }
        total
    } else {
        parse_radix(s, 10)?
    };
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| IntError::Overflow)
}

/// PyYAML's `construct_yaml_float`.
fn construct_float(value: &str) -> Option<f64> {
    let cleaned = value.replace('_', "").to_lowercase();
    let sign = if cleaned.starts_with('-') { -1.0 } else { 1.0 };
    let (_, s) = strip_sign(&cleaned);
    if s == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if s == ".nan" {
        return Some(f64::NAN);
    }
    if s.contains(':') {
        let mut total = 0.0;
        for part in s.split(':') {
            total = total * 60.0 + part.parse::<f64>().ok()?;
        }
        return Some(sign * total);
    }
    s.parse::<f64>().ok().map(|f| sign * f)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{err, ok};
    use super::super::{Mark, Node, NodeKind};
    use serde_json::json;

    /// The value of key `a` in `a: <scalar>`.
    fn scalar(text: &str) -> NodeKind {
        let node = ok(&format!("a: {text}"));
        match node.get("a") {
            Some(n) => n.kind.clone(),
            None => panic!("no key a in {text:?}"),
        }
    }

    #[test]
    fn pyyaml_scalar_table() {
        use NodeKind::{Bool, Float, Int, Null, Str};
        let s = |v: &str| Str(v.to_owned());
        // Expectations generated with PyYAML 6.0.3 `yaml.safe_load("a: " + text)["a"]`.
        let table: Vec<(&str, NodeKind)> = vec![
            ("", Null),
            ("~", Null),
            ("null", Null),
            ("Null", Null),
            ("NULL", Null),
            ("nULL", s("nULL")),
            ("yes", Bool(true)),
            ("Yes", Bool(true)),
            ("YES", Bool(true)),
            ("no", Bool(false)),
            ("No", Bool(false)),
            ("NO", Bool(false)),
            ("true", Bool(true)),
            ("True", Bool(true)),
            ("TRUE", Bool(true)),
            ("false", Bool(false)),
            ("False", Bool(false)),
            ("FALSE", Bool(false)),
            ("on", Bool(true)),
            ("On", Bool(true)),
            ("ON", Bool(true)),
            ("off", Bool(false)),
            ("Off", Bool(false)),
            ("OFF", Bool(false)),
            ("y", s("y")),
            ("n", s("n")),
            ("yEs", s("yEs")),
            ("0", Int(0)),
            ("-0", Int(0)),
            ("+12", Int(12)),
            ("-12", Int(-12)),
            ("1_000", Int(1000)),
            ("1__000", Int(1000)),
            ("010", Int(8)),
            ("-010", Int(-8)),
            ("00", Int(0)),
            ("0_", Int(0)),
            ("08", s("08")),
            ("0o17", s("0o17")),
            ("0x1F", Int(31)),
            ("0x_1_f", Int(31)),
            ("-0x10", Int(-16)),
            ("0b101", Int(5)),
            ("+0b11", Int(3)),
            ("0B101", s("0B101")),
            ("0X1F", s("0X1F")),
            ("1:30", Int(90)),
            ("1:5", Int(65)),
            ("190:20:30", Int(685_230)),
            ("-1:30", Int(-90)),
            ("0:30", s("0:30")),
            ("1:60", s("1:60")),
            ("_1", s("_1")),
            ("1_", Int(1)),
            ("9223372036854775807", Int(i64::MAX)),
            ("-9223372036854775808", Int(i64::MIN)),
            ("1.5", Float(1.5)),
            ("-1.5", Float(-1.5)),
            ("1.", Float(1.0)),
            (".5", Float(0.5)),
            ("1_1.", Float(11.0)),
            ("0.0_1", Float(0.01)),
            ("1.0e+3", Float(1000.0)),
            ("1.e+3", Float(1000.0)),
            ("1.5E-2", Float(0.015)),
            ("1.0e3", s("1.0e3")),
            ("1e3", s("1e3")),
            ("1e+3", s("1e+3")),
            ("._5", s("._5")),
            ("-.5", s("-.5")),
            (".", s(".")),
            ("1:30.5", Float(90.5)),
            ("0:30.5", Float(30.5)),
            (".inf", Float(f64::INFINITY)),
            (".Inf", Float(f64::INFINITY)),
            ("+.INF", Float(f64::INFINITY)),
            ("-.inf", Float(f64::NEG_INFINITY)),
            ("inf", s("inf")),
            ("-.nan", s("-.nan")),
            ("nan", s("nan")),
            ("2024-01-01", s("2024-01-01")), // PyYAML: datetime.date (documented deviation)
            ("=", s("=")),                   // PyYAML: constructor error (documented deviation)
            ("hello world", s("hello world")),
            ("'yes'", s("yes")),
            ("\"010\"", s("010")),
            ("'1e3'", s("1e3")),
            ("'~'", s("~")),
            ("''", s("")),
            ("!!str 010", s("010")),
            ("!!str yes", s("yes")),
            ("!!int '0x10'", Int(16)),
            ("!!int \"12\"", Int(12)),
            ("!!float 1", Float(1.0)),
            ("!!float 1e3", Float(1000.0)),
            ("!!float 010", Float(10.0)),
            ("!!bool yEs", Bool(true)),
            ("!!bool 'off'", Bool(false)),
            ("!!null ''", Null),
            ("!!null", Null),
            ("!<tag:yaml.org,2002:int> 3", Int(3)),
        ];
        for (text, expected) in table {
            assert_eq!(scalar(text), expected, "for {text:?}");
        }
    }

    #[test]
    fn nan_resolves() {
        for text in [".nan", ".NaN", ".NAN"] {
            assert!(matches!(scalar(text), NodeKind::Float(f) if f.is_nan()), "{text}");
        }
    }

    #[test]
    fn block_scalars_are_strings() {
        let node = ok("a: |\n  yes\nb: >\n  123\n  456\n");
        assert_eq!(node.get("a").map(|n| n.kind.clone()), Some(NodeKind::Str("yes\n".into())));
        assert_eq!(node.get("b").and_then(Node::as_str), Some("123 456\n"));
    }

    #[test]
    fn integer_overflow_is_an_error() {
        let e = err("a: 9223372036854775808");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("out of range"), "{e}");
        assert!(err("a: -9223372036854775809").message.contains("out of range"));
        assert!(err("a: 0x8000000000000000").message.contains("out of range"));
        assert!(err("a: 99999999999999999999999999999999999999999999").message.contains("out of range"));
        // Quoted, it is just text.
        assert_eq!(scalar("'9223372036854775808'"), NodeKind::Str("9223372036854775808".into()));
    }

    #[test]
    fn bad_explicit_values() {
        assert!(err("a: !!int abc").message.contains("invalid integer `abc`"));
        assert!(err("a: !!float abc").message.contains("expected a number"));
        assert!(err("a: !!bool maybe").message.contains("expected true, false"));
        assert!(err("a: !!null foo").message.contains("expected null"));
        // `0b_` and `0x_` match PyYAML's pattern, but PyYAML cannot build them either.
        assert!(err("a: 0b_").message.contains("invalid integer"));
        assert!(err("a: 0x_").message.contains("invalid integer"));
    }

    #[test]
    fn unsupported_tags_are_named() {
        let e = err("a: !foo x");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("`!foo`"), "{e}");
        assert!(err("a: !!binary aGVsbG8=").message.contains("`!!binary`"));
        assert!(err("a: !!set {x: null}").message.contains("`!!set`"));
        assert!(err("a: ! x").message.contains("`!`"));
        assert!(err("a: !!map [1]").message.contains("`!!map`"));
        assert!(ok("a: !!map {b: 1}").get("a").is_some());
        assert!(ok("a: !!seq [1]").get("a").is_some());
        let e = err("a: !!str [1]");
        assert!(e.message.contains("unsupported tag `!!str` on a sequence"), "{e}");
    }

    #[test]
    fn merge_keys_are_rejected() {
        let e = err("base: &b {x: 1}\nderived:\n  <<: *b\n");
        assert_eq!(e.mark, Mark::new(3, 3));
        assert!(e.message.starts_with("merge keys are not supported"), "{e}");
        // Quoted, `<<` is an ordinary key.
        assert_eq!(ok("'<<': 1").to_json(), json!({"<<": 1}));
    }
}
