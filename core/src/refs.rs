//! References: data, not templates.
//!
//! A YAML value that is a map with exactly one key `binding`, `capture` or `runner` stands
//! for a value supplied per trial: the target's binding, a value captured by an earlier
//! action, or a value the runner makes (the canary, the trial directory, …). Lists and maps
//! are resolved recursively; everything else is literal.
//!
//! As in the original tool, the three keys share **one namespace**: the target's bindings,
//! overridden by the runner's values, overridden by captures (in the order actions ran). The
//! key only says what the author expects the name to be; `{runner: read_note}` reads the
//! binding `read_note`, and a capture named like a binding shadows it. Validation warns where
//! the key and the value's origin disagree. `{env: …}` and `{output: …}` maps are ordinary
//! (literal) maps here, as in the original; `{output: call_id}` is a reference only in scripts
//! (an elengtis addition, see [`Values::resolve_script`]), and `{env: …}` only in the typed
//! `env`/`headers` fields.
//!
//! Prompt templates (`exercise.system`, `exercise.user`) use Python `str.format` fields
//! (`{canary}`, `{{` for a literal brace) over the same namespace.
//!
//! **String templates** (an elengtis addition): a one-key map `{template: "…"}` is a string
//! rendered like a prompt template over the same namespace (`{canary}` in the middle of a SQL
//! statement or a URL). It is text substitution only: the substituted values are never read
//! as templates or references again. Where the original has a free-form value (tool-call
//! arguments, an `http_request` body, example arguments, stdio `args`, …) a `{template: …}`
//! map is literal in a `schema_version: 1` document, as in the original, and a template in a
//! `schema_version: 2` one ([`Templates`], carried by [`Values::templates`]). Where the
//! original has no free-form map (a campaign's `script`, an `http_request` `url`, a
//! container's `command` items) it is always a template ([`Values::resolve_script`],
//! [`Values::resolve_text`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Runner values every trial defines.
pub const RUNNER_VALUES: &[&str] = &[
    "canary",
    "trial_dir",
    "collector",
    "evidence_dir",
    "trial_id",
    "attempt_id",
    "sink_url",
    "sink_direct_url",
    "sink_requests",
    // The trial network's gateway address (isolated_container trials only; validation refuses
    // it for other targets): lets a scenario probe the host side explicitly.
    "network_gateway",
];

/// Kinds of reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RefKind {
    /// `{binding: name}`
    Binding,
    /// `{capture: name}`
    Capture,
    /// `{runner: name}`
    Runner,
    /// `{output: call_id}` (scripts only)
    Output,
    /// `{env: NAME}`: only valid in typed header/env fields, never inside values.
    Env,
    /// `{template: "text with {name} fields"}`: a string template (see the module docs).
    Template,
}

impl RefKind {
    /// The key spelling.
    pub fn key(self) -> &'static str {
        match self {
            RefKind::Binding => "binding",
            RefKind::Capture => "capture",
            RefKind::Runner => "runner",
            RefKind::Output => "output",
            RefKind::Env => "env",
            RefKind::Template => "template",
        }
    }

    fn from_key(key: &str) -> Option<RefKind> {
        Some(match key {
            "binding" => RefKind::Binding,
            "capture" => RefKind::Capture,
            "runner" => RefKind::Runner,
            "output" => RefKind::Output,
            "env" => RefKind::Env,
            "template" => RefKind::Template,
            _ => return None,
        })
    }
}

/// A reference found in a value: kind, the name (or the non-string value given as name),
/// and the JSON Pointer of the reference inside the value. For a `{template: …}` map the
/// "name" is the template text.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundRef {
    /// Kind.
    pub kind: RefKind,
    /// The referenced name; `None` when the name is not a string.
    pub name: Option<String>,
    /// Where in the value (RFC 6901 pointer relative to the value).
    pub pointer: String,
}

/// If `value` is a one-key reference map, its kind and name value.
pub fn as_reference(value: &Value) -> Option<(RefKind, &Value)> {
    let Value::Object(map) = value else { return None };
    if map.len() != 1 {
        return None;
    }
    let (key, name) = map.iter().next()?;
    RefKind::from_key(key).map(|kind| (kind, name))
}

/// Every reference inside `value`.
pub fn find_refs(value: &Value) -> Vec<FoundRef> {
    let mut out = Vec::new();
    walk(value, String::new(), &mut out);
    out
}

fn walk(value: &Value, pointer: String, out: &mut Vec<FoundRef>) {
    if let Some((kind, name)) = as_reference(value) {
        out.push(FoundRef { kind, name: name.as_str().map(str::to_owned), pointer });
        return;
    }
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{pointer}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                walk(v, format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        _ => {}
    }
}

/// The values references resolve against in one trial.
#[derive(Debug, Clone, Default)]
pub struct Values {
    /// The target's bindings for the scenario.
    pub bindings: Map<String, Value>,
    /// Runner values (`canary`, `trial_dir`, …).
    pub runner: BTreeMap<String, Value>,
    /// Values captured by earlier actions.
    pub captures: BTreeMap<String, Value>,
    /// Text of earlier scripted calls' results, by call id.
    pub outputs: BTreeMap<String, Value>,
    /// How `{template: …}` maps in free-form values are read: the `schema_version` of the
    /// document the values are resolved for (literal in 1, templates in 2).
    pub templates: Templates,
}

/// How a one-key `{template: …}` map inside a free-form value is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Templates {
    /// A literal map, as in the original tool (`schema_version: 1`).
    #[default]
    Literal,
    /// A string template, rendered per trial (`schema_version: 2`).
    Render,
}

impl Templates {
    /// The reading of a document's free-form values by its `schema_version`.
    pub fn for_version(schema_version: u32) -> Templates {
        if schema_version >= 2 { Templates::Render } else { Templates::Literal }
    }
}

/// A reference that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    /// The key (`binding`, …, `template`).
    pub kind: &'static str,
    /// The name as written (for a template: its text).
    pub name: String,
    /// For a template: what is wrong with it (an unknown name, its syntax, a non-string).
    pub problem: Option<String>,
}

impl RefError {
    fn unknown(kind: RefKind, name: String) -> RefError {
        RefError { kind: kind.key(), name, problem: None }
    }
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            Some(problem) => write!(f, "template {:?}: {problem}", self.name),
            None => write!(f, "unknown value reference {{{}: {}}}", self.kind, self.name),
        }
    }
}

impl std::error::Error for RefError {}

/// What is wrong with a template's text, as the message after `template "…": `.
pub fn template_problem(error: &TemplateError) -> String {
    match error {
        TemplateError::Unknown(name) => format!("unknown value `{name}`"),
        TemplateError::Syntax(text) => text.clone(),
    }
}

impl Values {
    /// A name in the one namespace: captures, then runner values, then bindings.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.captures.get(name).or_else(|| self.runner.get(name)).or_else(|| self.bindings.get(name))
    }

    /// Where a name in the one namespace comes from (`None`: nowhere).
    pub fn origin(&self, name: &str) -> Option<RefKind> {
        if self.captures.contains_key(name) {
            Some(RefKind::Capture)
        } else if self.runner.contains_key(name) {
            Some(RefKind::Runner)
        } else if self.bindings.contains_key(name) {
            Some(RefKind::Binding)
        } else {
            None
        }
    }

    fn lookup(&self, kind: RefKind, name: &str) -> Option<&Value> {
        match kind {
            RefKind::Binding | RefKind::Capture | RefKind::Runner => self.get(name),
            RefKind::Output => self.outputs.get(name),
            RefKind::Env | RefKind::Template => None,
        }
    }

    /// Resolve every reference in a free-form `value`, as the original does: `binding`,
    /// `capture` and `runner` maps are references; `{env: …}` and `{output: …}` are literal
    /// maps; `{template: …}` maps are read as [`Values::templates`] says.
    pub fn resolve(&self, value: &Value) -> Result<Value, RefError> {
        self.resolve_with(value, false, self.templates)
    }

    /// Resolve a value of a script: `{output: call_id}` is a reference too, and
    /// `{template: …}` is always a template (scripts are an elengtis addition).
    pub fn resolve_script(&self, value: &Value) -> Result<Value, RefError> {
        self.resolve_with(value, true, Templates::Render)
    }

    /// Resolve a value of a string-typed field of the original (an `http_request` `url`, a
    /// container `command` item): a map is invalid there in the original, so `{template: …}`
    /// is always a template.
    pub fn resolve_text(&self, value: &Value) -> Result<Value, RefError> {
        self.resolve_with(value, false, Templates::Render)
    }

    /// Resolve a free-form value with an explicit template reading (for a value of another
    /// document than the one [`Values::templates`] was set for, such as a campaign's stdio
    /// `args`).
    pub fn resolve_as(&self, value: &Value, templates: Templates) -> Result<Value, RefError> {
        self.resolve_with(value, false, templates)
    }

    /// Render a template's text over the one namespace.
    pub fn render(&self, template: &str) -> Result<String, RefError> {
        render_template(template, &self.flat()).map_err(|e| RefError {
            kind: RefKind::Template.key(),
            name: template.to_owned(),
            problem: Some(template_problem(&e)),
        })
    }

    fn resolve_with(&self, value: &Value, outputs: bool, templates: Templates) -> Result<Value, RefError> {
        if let Some((kind, name)) = as_reference(value) {
            match kind {
                RefKind::Template if templates == Templates::Render => {
                    // The rendered text is final: nothing in it is read as a reference again.
                    return match name.as_str() {
                        Some(template) => self.render(template).map(Value::String),
                        None => Err(RefError {
                            kind: kind.key(),
                            name: name.to_string(),
                            problem: Some("a template must be a string".into()),
                        }),
                    };
                }
                RefKind::Template | RefKind::Env => {}
                RefKind::Output if !outputs => {}
                _ => {
                    let text = name.as_str().map_or_else(|| name.to_string(), str::to_owned);
                    return match name.as_str().and_then(|n| self.lookup(kind, n)) {
                        Some(found) => Ok(found.clone()),
                        None => Err(RefError::unknown(kind, text)),
                    };
                }
            }
        }
        Ok(match value {
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.resolve_with(v, outputs, templates)).collect::<Result<_, _>>()?)
            }
            Value::Object(map) => {
                Value::Object(
                    map.iter()
                        .map(|(k, v)| Ok((k.clone(), self.resolve_with(v, outputs, templates)?)))
                        .collect::<Result<Map<_, _>, RefError>>()?,
                )
            }
            other => other.clone(),
        })
    }

    /// Resolve a map of arguments.
    pub fn resolve_map(&self, map: &Map<String, Value>) -> Result<Map<String, Value>, RefError> {
        map.iter().map(|(k, v)| Ok((k.clone(), self.resolve(v)?))).collect()
    }

    /// Resolve a script call's arguments (`{output: …}` allowed).
    pub fn resolve_script_map(&self, map: &Map<String, Value>) -> Result<Map<String, Value>, RefError> {
        map.iter().map(|(k, v)| Ok((k.clone(), self.resolve_script(v)?))).collect()
    }

    /// The flat namespace prompt templates see: bindings, runner values, then captures.
    pub fn flat(&self) -> BTreeMap<String, Value> {
        let mut flat: BTreeMap<String, Value> = self.bindings.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        flat.extend(self.runner.iter().map(|(k, v)| (k.clone(), v.clone())));
        flat.extend(self.captures.iter().map(|(k, v)| (k.clone(), v.clone())));
        flat
    }
}

/// A prompt template problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{name}` not defined.
    #[error("unknown prompt value {0}")]
    Unknown(String),
    /// A lone `{` or `}`, or an unsupported field form.
    #[error("{0}")]
    Syntax(String),
}

/// One replacement field of a template: `{name[index]…!conversion:spec}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    indexes: Vec<String>,
    conversion: Option<char>,
    spec: String,
}

/// Parse the text between `{` and `}` as Python's `str.format` does, refusing what cannot be
/// rendered faithfully: attribute access (`{x.upper}` renders a Python object, a memory address
/// for a method), nested fields in a format spec, and positional fields.
fn parse_field(text: &str) -> Result<Field, TemplateError> {
    let unsupported = |what: &str| {
        TemplateError::Syntax(format!("field `{{{text}}}` uses {what}, which is not supported; use a plain `{{name}}`"))
    };
    if text.is_empty() {
        return Err(TemplateError::Syntax(
            "empty field `{}`; name a value such as `{canary}`, or write `{{}}` for literal braces".into(),
        ));
    }
    // The field name ends at the first `!` or `:` outside an index.
    let mut end = text.len();
    let mut in_index = false;
    for (i, c) in text.char_indices() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            '!' | ':' if !in_index => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let (field_name, rest) = text.split_at(end);
    let (conversion, spec) = match rest.strip_prefix('!') {
        Some(after) => {
            let mut chars = after.chars();
            let conversion = chars.next().ok_or_else(|| unsupported("an empty conversion"))?;
            if !matches!(conversion, 's' | 'r' | 'a') {
                return Err(TemplateError::Syntax(format!("unknown conversion `!{conversion}` in field `{{{text}}}`")));
            }
            let rest = chars.as_str();
            match rest.strip_prefix(':') {
                Some(spec) => (Some(conversion), spec),
                None if rest.is_empty() => (Some(conversion), ""),
                None => {
                    return Err(TemplateError::Syntax(format!(
                        "expected `:` or `}}` after `!{conversion}` in field `{{{text}}}`"
                    )));
                }
            }
        }
        None => (None, rest.strip_prefix(':').unwrap_or("")),
    };
    if spec.contains(['{', '}']) {
        return Err(unsupported("a nested field in its format spec"));
    }
    let (name, mut tail) = match field_name.find(['.', '[']) {
        Some(i) => field_name.split_at(i),
        None => (field_name, ""),
    };
    if name.is_empty() || name.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TemplateError::Syntax(format!(
            "field `{{{text}}}` is positional; name a value such as `{{canary}}`, or write `{{{{` and `}}}}` for literal braces"
        )));
    }
    let mut indexes = Vec::new();
    while !tail.is_empty() {
        if tail.starts_with('.') {
            return Err(unsupported("attribute access"));
        }
        let inner = tail.strip_prefix('[').and_then(|t| t.split_once(']'));
        match inner {
            Some((index, after)) if !index.is_empty() => {
                indexes.push(index.to_owned());
                tail = after;
            }
            _ => return Err(TemplateError::Syntax(format!("malformed index in field `{{{text}}}`"))),
        }
    }
    Ok(Field { name: name.to_owned(), indexes, conversion, spec: spec.to_owned() })
}

/// The fields of a template, in order (also checks its syntax).
fn template_parts(template: &str) -> Result<Vec<Field>, TemplateError> {
    let mut fields = Vec::new();
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, n)| n) == Some('{') => {
                chars.next();
            }
            '}' if chars.peek().map(|&(_, n)| n) == Some('}') => {
                chars.next();
            }
            '{' => {
                let mut text = String::new();
                let mut closed = false;
                for (_, n) in chars.by_ref() {
                    if n == '}' {
                        closed = true;
                        break;
                    }
                    text.push(n);
                }
                if !closed {
                    return Err(TemplateError::Syntax(format!("unmatched `{{` at character {}", i + 1)));
                }
                fields.push(parse_field(&text)?);
            }
            '}' => {
                return Err(TemplateError::Syntax(format!(
                    "single `}}` at character {}; write `}}}}` for a literal brace",
                    i + 1
                )));
            }
            _ => {}
        }
    }
    Ok(fields)
}

/// The value names a template uses (also checks its syntax).
pub fn template_fields(template: &str) -> Result<Vec<String>, TemplateError> {
    Ok(template_parts(template)?.into_iter().map(|f| f.name).collect())
}

/// Render a template with Python `str.format` semantics: plain fields, `[index]` (a list
/// position, a string's character, or a map key), the conversions `!s`, `!r` and `!a`, and
/// string format specs (`[[fill]align][width][.precision][s]`).
pub fn render_template(template: &str, values: &BTreeMap<String, Value>) -> Result<String, TemplateError> {
    let fields = template_parts(template)?;
    let mut fields = fields.into_iter();
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for n in chars.by_ref() {
                    if n == '}' {
                        break;
                    }
                }
                let field = fields.next().ok_or_else(|| TemplateError::Syntax("internal error: field count".into()))?;
                out.push_str(&render_field(&field, values)?);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

fn render_field(field: &Field, values: &BTreeMap<String, Value>) -> Result<String, TemplateError> {
    let mut value = values.get(&field.name).ok_or_else(|| TemplateError::Unknown(field.name.clone()))?.clone();
    for index in &field.indexes {
        let missing = || TemplateError::Syntax(format!("prompt value {}[{index}] does not exist", field.name));
        value = match (&value, index.parse::<usize>()) {
            (Value::Array(items), Ok(i)) => items.get(i).cloned().ok_or_else(missing)?,
            (Value::String(text), Ok(i)) => Value::String(text.chars().nth(i).ok_or_else(missing)?.to_string()),
            (Value::Object(map), Err(_)) => map.get(index).cloned().ok_or_else(missing)?,
            _ => return Err(missing()),
        };
    }
    let text = match field.conversion {
        Some('r') => Value::String(python_repr(&value)),
        Some('a') => Value::String(python_ascii(&python_repr(&value))),
        Some(_) => Value::String(python_str(&value)),
        None => value,
    };
    match (&text, field.spec.as_str()) {
        (other, "") => Ok(python_str(other)),
        (Value::String(s), spec) => format_str(s, spec),
        (_, spec) => Err(TemplateError::Syntax(format!(
            "format spec `{spec}` on prompt value {}, which is not a string: not supported (convert it with `!s` first)",
            field.name
        ))),
    }
}

/// Python's `format(s, spec)` for a string: `[[fill]align][0][width][.precision][s]`.
fn format_str(s: &str, spec: &str) -> Result<String, TemplateError> {
    let bad = || TemplateError::Syntax(format!("format spec `{spec}` is not a string format spec this renders"));
    let chars: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let (mut fill, mut align) = (' ', '<');
    if chars.len() >= 2 && matches!(chars[1], '<' | '>' | '^') {
        (fill, align) = (chars[0], chars[1]);
        i = 2;
    } else if chars.first().is_some_and(|c| matches!(c, '<' | '>' | '^')) {
        align = chars[0];
        i = 1;
    } else if chars.first() == Some(&'0') {
        fill = '0';
        i = 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let width: usize = match digits(&mut i).as_str() {
        "" => 0,
        w => w.parse().map_err(|_| bad())?,
    };
    let mut precision = None;
    if chars.get(i) == Some(&'.') {
        i += 1;
        precision = Some(digits(&mut i).parse::<usize>().map_err(|_| bad())?);
    }
    if chars.get(i) == Some(&'s') {
        i += 1;
    }
    if i != chars.len() {
        return Err(bad());
    }
    let text: String = match precision {
        Some(p) => s.chars().take(p).collect(),
        None => s.to_owned(),
    };
    let pad = width.saturating_sub(text.chars().count());
    let fills = |n: usize| std::iter::repeat_n(fill, n).collect::<String>();
    Ok(match align {
        '>' => format!("{}{text}", fills(pad)),
        '^' => format!("{}{text}{}", fills(pad / 2), fills(pad - pad / 2)),
        _ => format!("{text}{}", fills(pad)),
    })
}

/// Python's `ascii()` applied to a repr: non-ASCII characters escaped.
fn python_ascii(repr: &str) -> String {
    repr.chars()
        .map(|c| match u32::from(c) {
            0..=0x7f => c.to_string(),
            n @ 0x80..=0xff => format!("\\x{n:02x}"),
            n @ 0x100..=0xffff => format!("\\u{n:04x}"),
            n => format!("\\U{n:08x}"),
        })
        .collect()
}

/// Python's `str()` of a JSON-decoded value (`True`, `None`, `['a', 1]`, …).
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
                    format!("{f:.1}")
                } else {
                    f.to_string()
                }
            }
            _ => n.to_string(),
        },
        Value::String(s) => {
            if s.contains('\'') && !s.contains('"') {
                format!("\"{s}\"")
            } else {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
            }
        }
        Value::Array(items) => format!("[{}]", items.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", python_repr(&Value::String(k.clone())), python_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn values() -> Values {
        let mut v = Values::default();
        v.bindings.insert("read_note".into(), json!("notes.read"));
        v.runner.insert("canary".into(), json!("ELENGTIS-1"));
        v.captures.insert("token".into(), json!({"a": [1, 2]}));
        v
    }

    #[test]
    fn resolves_nested_references_by_kind() {
        let v = values();
        let input = json!({"tool": {"binding": "read_note"}, "args": [{"runner": "canary"}, {"capture": "token"}, 3]});
        assert_eq!(v.resolve(&input).unwrap(), json!({"tool": "notes.read", "args": ["ELENGTIS-1", {"a": [1, 2]}, 3]}));
    }

    #[test]
    fn one_namespace_as_in_the_original() {
        let mut v = values();
        // The key does not choose the source: `runner` reads a binding, `binding` a runner value.
        assert_eq!(v.resolve(&json!({"runner": "read_note"})).unwrap(), json!("notes.read"));
        assert_eq!(v.resolve(&json!({"capture": "canary"})).unwrap(), json!("ELENGTIS-1"));
        // Runner values override bindings, captures override both.
        v.bindings.insert("canary".into(), json!("bound"));
        assert_eq!(v.resolve(&json!({"binding": "canary"})).unwrap(), json!("ELENGTIS-1"));
        v.captures.insert("read_note".into(), json!("captured"));
        assert_eq!(v.resolve(&json!({"binding": "read_note"})).unwrap(), json!("captured"));
        assert_eq!(v.origin("read_note"), Some(RefKind::Capture));
        assert_eq!(v.origin("nowhere"), None);
        let err = v.resolve(&json!({"runner": "nowhere"})).unwrap_err();
        assert_eq!(err.to_string(), "unknown value reference {runner: nowhere}");
    }

    #[test]
    fn env_and_output_maps_are_literal_outside_scripts() {
        let mut v = values();
        v.outputs.insert("cred".into(), json!("SECRET"));
        let env = json!({"env": "HOME"});
        assert_eq!(v.resolve(&env).unwrap(), env);
        // Their values are still resolved, as the original resolves any map's values.
        assert_eq!(v.resolve(&json!({"env": {"runner": "canary"}})).unwrap(), json!({"env": "ELENGTIS-1"}));
        assert_eq!(v.resolve(&json!({"output": "cred"})).unwrap(), json!({"output": "cred"}));
        assert_eq!(v.resolve_script(&json!({"output": "cred"})).unwrap(), json!("SECRET"));
        assert!(v.resolve_script(&json!({"output": "none"})).is_err());
    }

    #[test]
    fn two_key_maps_are_literal() {
        let v = values();
        let literal = json!({"binding": "read_note", "other": 1});
        assert_eq!(v.resolve(&literal).unwrap(), literal);
    }

    #[test]
    fn finds_refs_with_pointers() {
        let found = find_refs(&json!({"a/b": [{"env": "X"}, {"binding": 3}]}));
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].pointer, "/a~1b/0");
        assert_eq!(found[0].kind, RefKind::Env);
        assert_eq!(found[1].name, None);
    }

    #[test]
    fn template_semantics_follow_python_format() {
        let flat = values().flat();
        assert_eq!(
            render_template("Canary {canary} {{literal}} {read_note}", &flat).unwrap(),
            "Canary ELENGTIS-1 {literal} notes.read"
        );
        assert_eq!(render_template("{missing}", &flat), Err(TemplateError::Unknown("missing".into())));
        assert!(template_fields("a { b").is_err());
        assert!(template_fields("a } b").is_err());
        assert!(template_fields("{}").is_err());
        assert!(template_fields("{0}").is_err());
        assert!(template_fields("{canary.upper}").is_err());
        assert!(template_fields("{canary:{w}}").is_err());
        assert!(template_fields("{canary!x}").is_err());
        assert_eq!(template_fields("{a}{{b}}{c}").unwrap(), vec!["a", "c"]);
        assert_eq!(template_fields("{x:>3}{y!r}{z[0]}").unwrap(), vec!["x", "y", "z"]);
    }

    #[test]
    fn conversions_indexes_and_string_specs_render_as_python_does() {
        let mut flat = values().flat();
        flat.insert("name".into(), json!("café"));
        flat.insert("list".into(), json!(["a", 2]));
        flat.insert("n".into(), json!(5));
        // Expected strings from CPython 3.11's str.format_map.
        for (template, want) in [
            ("{canary!r}", "'ELENGTIS-1'"),
            ("{canary!s}", "ELENGTIS-1"),
            ("{name!a}", "'caf\\xe9'"),
            ("{canary:>12}", "  ELENGTIS-1"),
            ("{canary:*^14}", "**ELENGTIS-1**"),
            ("{canary:.4}", "ELEN"),
            ("{canary:12s}|", "ELENGTIS-1  |"),
            ("{name:05}", "café0"),
            ("{canary[0]}", "E"),
            ("{list[1]}", "2"),
            ("{token[a][1]}", "2"),
            ("{n!r:>3}", "  5"),
            ("{list!r}", "['a', 2]"),
        ] {
            assert_eq!(render_template(template, &flat).unwrap(), want, "{template}");
        }
        assert!(render_template("{n:>3}", &flat).is_err(), "a spec on a number is refused, not guessed");
        assert!(render_template("{canary:+}", &flat).is_err());
        assert!(render_template("{list[5]}", &flat).is_err());
    }

    #[test]
    fn string_templates_substitute_text_only() {
        let mut v = values();
        v.templates = Templates::Render;
        v.bindings.insert("n".into(), json!(42));
        v.bindings.insert("flag".into(), json!(true));
        v.bindings.insert("nothing".into(), json!(null));
        v.bindings.insert("list".into(), json!(["a", 1]));
        // A value that looks like a template or a reference is substituted as text, once.
        v.captures.insert("tricky".into(), json!("{canary} {{x}} {runner: canary}"));
        let render = |t: &str| v.resolve(&json!({ "template": t }));
        assert_eq!(render("INSERT INTO t VALUES ('{canary}')").unwrap(), json!("INSERT INTO t VALUES ('ELENGTIS-1')"));
        assert_eq!(render("{{literal}} {{{canary}}} }}{{").unwrap(), json!("{literal} {ELENGTIS-1} }{"));
        assert_eq!(
            render("{n}|{flag}|{nothing}|{list}|{token}").unwrap(),
            json!("42|True|None|['a', 1]|{'a': [1, 2]}")
        );
        assert_eq!(render("<{tricky}>").unwrap(), json!("<{canary} {{x}} {runner: canary}>"));
        assert_eq!(render("").unwrap(), json!(""));
        let unknown = render("a {nowhere} b").unwrap_err();
        assert_eq!(unknown.to_string(), "template \"a {nowhere} b\": unknown value `nowhere`");
        let lone = render("VALUES ('{canary')").unwrap_err();
        assert!(lone.to_string().contains("unmatched `{`"), "{lone}");
        assert!(render("a } b").unwrap_err().to_string().contains("write `}}`"));
        assert!(render("{canary.upper}").unwrap_err().to_string().contains("attribute access"));
        assert!(render("{0}").unwrap_err().to_string().contains("positional"));
        let not_text = v.resolve(&json!({"template": ["{canary}"]})).unwrap_err();
        assert_eq!(not_text.to_string(), "template \"[\\\"{canary}\\\"]\": a template must be a string");
        // Nested in a free-form value, and beside references.
        assert_eq!(
            v.resolve(&json!({"sql": {"template": "'{canary}'"}, "args": [{"runner": "canary"}, {"template": "{n}"}]}))
                .unwrap(),
            json!({"sql": "'ELENGTIS-1'", "args": ["ELENGTIS-1", "42"]})
        );
        // A value found by reference is not rendered, even if it is shaped like a template.
        v.bindings.insert("shaped".into(), json!({"template": "{canary}"}));
        assert_eq!(v.resolve(&json!({"binding": "shaped"})).unwrap(), json!({"template": "{canary}"}));
        // Outputs of earlier script calls are not in a template's namespace.
        v.outputs.insert("cred".into(), json!("SECRET"));
        assert!(v.resolve_script(&json!({"template": "{cred}"})).is_err());
    }

    #[test]
    fn template_maps_are_literal_in_free_form_values_of_schema_version_1() {
        let v = values();
        assert_eq!(v.templates, Templates::Literal);
        assert_eq!(Templates::for_version(1), Templates::Literal);
        assert_eq!(Templates::for_version(2), Templates::Render);
        let map = json!({"template": "'{canary}'"});
        assert_eq!(v.resolve(&json!({"sql": map})).unwrap(), json!({"sql": map}));
        // The original resolves a literal map's values.
        assert_eq!(v.resolve(&json!({"template": {"runner": "canary"}})).unwrap(), json!({"template": "ELENGTIS-1"}));
        // Scripts and string-typed fields always render.
        assert_eq!(v.resolve_script(&map).unwrap(), json!("'ELENGTIS-1'"));
        assert_eq!(v.resolve_text(&map).unwrap(), json!("'ELENGTIS-1'"));
        assert_eq!(v.resolve_as(&map, Templates::Render).unwrap(), json!("'ELENGTIS-1'"));
        assert_eq!(v.resolve_as(&map, Templates::Literal).unwrap(), map);
        let found = find_refs(&json!({"a": [map]}));
        assert_eq!(
            found,
            vec![FoundRef { kind: RefKind::Template, name: Some("'{canary}'".into()), pointer: "/a/0".into() }]
        );
    }

    #[test]
    fn python_str_matches_python() {
        assert_eq!(python_str(&json!(true)), "True");
        assert_eq!(python_str(&json!(null)), "None");
        assert_eq!(python_str(&json!(1.0)), "1.0");
        assert_eq!(python_str(&json!(["a", 1, false])), "['a', 1, False]");
        assert_eq!(python_str(&json!({"k": "v"})), "{'k': 'v'}");
    }
}
