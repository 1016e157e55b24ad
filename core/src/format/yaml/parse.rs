//! The parser's event stream → a [`Node`] tree.
//!
//! `saphyr-parser` produces events (document start, scalar, sequence start, alias, …) with
//! their positions. A [`Builder`] turns them into an unexpanded tree in which an alias points
//! at its anchored node, checking as it goes that there is exactly one document, that
//! mapping keys are unique strings, and that the expansion stays within [`MAX_NODES`],
//! [`MAX_DEPTH`] and [`MAX_ALIAS_TEXT`] (so alias bombs are rejected before anything is
//! copied). The tree is then expanded, aliases copied, into [`Node`]s. Scalars and tags are
//! resolved by [`super::scalar`].

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

use super::scalar::{core_suffix, resolve_scalar, tag_text};
use super::{MAX_ALIAS_TEXT, MAX_DEPTH, MAX_NODES, Mark, Node, NodeKind, YamlError};

/// Reads one YAML document: the events of `text`, built into a tree by a [`Builder`].
pub(super) fn document(text: &str) -> Result<Node, YamlError> {
    let mut builder = Builder::default();
    let mut document_seen = false;
    for item in Parser::new_from_str(text) {
        let (event, span) = item?;
        let mark = Mark::from_marker(&span.start);
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                if document_seen {
                    return Err(YamlError::new(
                        mark,
                        "found a second document; expected exactly one YAML document per file",
                    ));
                }
                document_seen = true;
            }
            Event::Scalar(value, style, anchor, tag) => {
                builder.scalar(&value, style, anchor, tag.as_deref(), mark)?;
            }
            Event::SequenceStart(anchor, tag) => {
                builder.start(anchor, tag.as_deref(), mark, false)?;
            }
            Event::MappingStart(anchor, tag) => {
                builder.start(anchor, tag.as_deref(), mark, true)?;
            }
            Event::SequenceEnd | Event::MappingEnd => builder.end()?,
            Event::Alias(id) => builder.alias(id, mark)?,
        }
    }
    builder.finish()
}

const EMPTY_FILE: &str = "the file is empty; expected a YAML mapping";

/// A node of the unexpanded document; aliases point at their anchored node.
#[derive(Debug)]
struct RawNode {
    kind: RawKind,
    mark: Mark,
}

#[derive(Debug)]
enum RawKind {
    /// A scalar value (never `Seq` or `Map`), with the text of a plain scalar that did not
    /// resolve to a string.
    Scalar(NodeKind, Option<Box<str>>),
    Seq(Vec<usize>),
    Map(Vec<(usize, usize)>),
    Alias(usize),
}

/// What an anchor names, with the size of its expansion.
#[derive(Debug, Clone, Copy)]
struct Anchored {
    index: usize,
    nodes: usize,
    height: usize,
    text: usize,
}

#[derive(Debug)]
struct Frame {
    mark: Mark,
    anchor: usize,
    nodes_before: usize,
    text_before: usize,
    /// Largest height of a child (0 for scalars).
    child_height: usize,
    kind: FrameKind,
}

#[derive(Debug)]
enum FrameKind {
    Seq(Vec<usize>),
    Map { entries: Vec<(usize, usize)>, key: Option<usize>, seen: HashMap<String, Mark> },
}

#[derive(Debug, Default)]
struct Builder {
    nodes: Vec<RawNode>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    /// Nodes in the expanded tree so far.
    expanded_nodes: usize,
    /// Bytes of scalar text in the expanded tree so far.
    expanded_text: usize,
    /// Bytes of scalar text copied by aliases so far.
    alias_text: usize,
    root: Option<(usize, bool)>,
}

impl Builder {
    fn push(&mut self, kind: RawKind, mark: Mark) -> usize {
        self.nodes.push(RawNode { kind, mark });
        self.nodes.len() - 1
    }

    fn count_nodes(&mut self, n: usize, mark: Mark) -> Result<(), YamlError> {
        self.expanded_nodes = self.expanded_nodes.saturating_add(n);
        if self.expanded_nodes > MAX_NODES {
            return Err(YamlError::new(
                mark,
                format!(
                    "the document expands to more than {MAX_NODES} nodes (too large, or an alias bomb); expected a smaller document"
                ),
            ));
        }
        Ok(())
    }

    fn scalar(
        &mut self,
        value: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        mark: Mark,
    ) -> Result<(), YamlError> {
        let kind = resolve_scalar(value, style, tag, mark)?;
        // An empty plain scalar as the whole document is an empty file (e.g. only `---`).
        let implicit_empty =
            self.stack.is_empty() && tag.is_none() && anchor == 0 && style == ScalarStyle::Plain && value.is_empty();
        self.count_nodes(1, mark)?;
        let text = text_len(&kind);
        self.expanded_text = self.expanded_text.saturating_add(text);
        let plain = (tag.is_none()
            && style == ScalarStyle::Plain
            && matches!(kind, NodeKind::Bool(_) | NodeKind::Int(_) | NodeKind::Float(_)))
        .then(|| Box::<str>::from(value));
        let index = self.push(RawKind::Scalar(kind, plain), mark);
        if anchor != 0 {
            self.anchors.insert(anchor, Anchored { index, nodes: 1, height: 0, text });
        }
        self.attach(index, 0, implicit_empty)
    }

    fn start(&mut self, anchor: usize, tag: Option<&Tag>, mark: Mark, is_map: bool) -> Result<(), YamlError> {
        if let Some(tag) = tag {
            let wanted = if is_map { "map" } else { "seq" };
            if core_suffix(tag) != Some(wanted) {
                let what = if is_map { "mapping" } else { "sequence" };
                return Err(YamlError::new(
                    mark,
                    format!("unsupported tag `{}` on a {what}; expected no tag or `!!{wanted}`", tag_text(tag)),
                ));
            }
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(depth_error(mark));
        }
        let nodes_before = self.expanded_nodes;
        self.count_nodes(1, mark)?;
        let kind = if is_map {
            FrameKind::Map { entries: Vec::new(), key: None, seen: HashMap::new() }
        } else {
            FrameKind::Seq(Vec::new())
        };
        self.stack.push(Frame { mark, anchor, nodes_before, text_before: self.expanded_text, child_height: 0, kind });
        Ok(())
    }

    fn end(&mut self) -> Result<(), YamlError> {
        let Some(frame) = self.stack.pop() else {
            return Err(YamlError::new(Mark::UNKNOWN, "internal error: collection end without a start"));
        };
        let kind = match frame.kind {
            FrameKind::Seq(items) => RawKind::Seq(items),
            FrameKind::Map { entries, key, .. } => {
                if key.is_some() {
                    return Err(YamlError::new(frame.mark, "internal error: mapping key without a value"));
                }
                RawKind::Map(entries)
            }
        };
        let height = frame.child_height.saturating_add(1);
        let index = self.push(kind, frame.mark);
        if frame.anchor != 0 {
            self.anchors.insert(
                frame.anchor,
                Anchored {
                    index,
                    nodes: self.expanded_nodes.saturating_sub(frame.nodes_before),
                    height,
                    text: self.expanded_text.saturating_sub(frame.text_before),
                },
            );
        }
        self.attach(index, height, false)
    }

    fn alias(&mut self, id: usize, mark: Mark) -> Result<(), YamlError> {
        let Some(anchored) = self.anchors.get(&id).copied() else {
            return Err(YamlError::new(
                mark,
                "alias to an anchor whose node is not complete (recursive aliases are not supported); expected an alias to an earlier, finished node",
            ));
        };
        self.count_nodes(anchored.nodes, mark)?;
        if self.stack.len().saturating_add(anchored.height) > MAX_DEPTH {
            return Err(depth_error(mark));
        }
        self.alias_text = self.alias_text.saturating_add(anchored.text);
        if self.alias_text > MAX_ALIAS_TEXT {
            return Err(YamlError::new(
                mark,
                format!(
                    "aliases copy more than {MAX_ALIAS_TEXT} bytes of text (an alias bomb?); expected fewer or smaller aliased values"
                ),
            ));
        }
        self.expanded_text = self.expanded_text.saturating_add(anchored.text);
        let index = self.push(RawKind::Alias(anchored.index), mark);
        self.attach(index, anchored.height, false)
    }

    /// Adds a finished node to the open collection (or makes it the root).
    fn attach(&mut self, index: usize, height: usize, implicit_empty: bool) -> Result<(), YamlError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some((index, implicit_empty));
            return Ok(());
        };
        frame.child_height = frame.child_height.max(height);
        match &mut frame.kind {
            FrameKind::Seq(items) => items.push(index),
            FrameKind::Map { entries, key, seen } => match key.take() {
                Some(k) => entries.push((k, index)),
                None => {
                    let mark = self.nodes.get(index).map_or(Mark::UNKNOWN, |n| n.mark);
                    let name = key_string(&self.nodes, index, mark)?;
                    if let Some(first) = seen.get(&name) {
                        return Err(YamlError::new(
                            mark,
                            format!(
                                "duplicate key `{name}` (first defined at {first}); expected each key once per mapping"
                            ),
                        ));
                    }
                    seen.insert(name, mark);
                    *key = Some(index);
                }
            },
        }
        Ok(())
    }

    fn finish(self) -> Result<Node, YamlError> {
        match self.root {
            None | Some((_, true)) => Err(YamlError::new(Mark::new(1, 1), EMPTY_FILE)),
            Some((index, false)) => {
                if let Some(frame) = self.stack.last() {
                    return Err(YamlError::new(frame.mark, "internal error: unclosed collection"));
                }
                expand(&self.nodes, index, None)
            }
        }
    }
}

fn depth_error(mark: Mark) -> YamlError {
    YamlError::new(mark, format!("nesting deeper than {MAX_DEPTH} levels; expected a shallower document"))
}

fn text_len(kind: &NodeKind) -> usize {
    match kind {
        NodeKind::Str(s) => s.len(),
        _ => 0,
    }
}

/// The text of a mapping key, which must be a string.
fn key_string(nodes: &[RawNode], index: usize, mark: Mark) -> Result<String, YamlError> {
    let mut node = nodes.get(index);
    if let Some(RawNode { kind: RawKind::Alias(target), .. }) = node {
        node = nodes.get(*target);
    }
    let found = match node.map(|n| &n.kind) {
        Some(RawKind::Scalar(NodeKind::Str(s), _)) => return Ok(s.clone()),
        Some(RawKind::Scalar(NodeKind::Null, _)) => "null".to_owned(),
        Some(RawKind::Scalar(NodeKind::Bool(b), _)) => format!("boolean `{b}`"),
        Some(RawKind::Scalar(NodeKind::Int(i), _)) => format!("integer `{i}`"),
        Some(RawKind::Scalar(NodeKind::Float(f), _)) => format!("float `{f}`"),
        Some(RawKind::Seq(_) | RawKind::Scalar(NodeKind::Seq(_), _)) => "a sequence".to_owned(),
        Some(RawKind::Map(_) | RawKind::Scalar(NodeKind::Map(_), _)) => "a mapping".to_owned(),
        Some(RawKind::Alias(_)) | None => "an unresolvable alias".to_owned(),
    };
    Err(YamlError::new(mark, format!("mapping keys must be strings, found {found}; quote the key to use it as text")))
}

/// Builds the expanded tree below `index`. Depth is bounded by [`MAX_DEPTH`] (checked while
/// building), so the recursion is too.
fn expand(nodes: &[RawNode], index: usize, mark: Option<Mark>) -> Result<Node, YamlError> {
    let Some(raw) = nodes.get(index) else {
        return Err(YamlError::new(mark.unwrap_or(Mark::UNKNOWN), "internal error: dangling node reference"));
    };
    let mark = mark.unwrap_or(raw.mark);
    let kind = match &raw.kind {
        RawKind::Scalar(kind, plain) => return Ok(Node { kind: kind.clone(), mark, plain: plain.clone() }),
        RawKind::Alias(target) => {
            if matches!(nodes.get(*target).map(|n| &n.kind), Some(RawKind::Alias(_))) {
                return Err(YamlError::new(mark, "internal error: alias of an alias"));
            }
            return expand(nodes, *target, Some(mark));
        }
        RawKind::Seq(items) => NodeKind::Seq(items.iter().map(|&i| expand(nodes, i, None)).collect::<Result<_, _>>()?),
        RawKind::Map(entries) => NodeKind::Map(
            entries
                .iter()
                .map(|&(k, v)| Ok((expand(nodes, k, None)?, expand(nodes, v, None)?)))
                .collect::<Result<_, YamlError>>()?,
        ),
    };
    Ok(Node::new(kind, mark))
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::testing::{err, ok};
    use super::*;
    use serde_json::json;

    #[test]
    fn marks_are_one_based() {
        let node = ok("targets:\n  - id: x\n    transport:\n      type: stdio\n");
        assert_eq!(node.mark, Mark::new(1, 1));
        let targets = node.get("targets").expect("targets");
        assert_eq!(targets.mark, Mark::new(2, 3));
        let NodeKind::Seq(items) = &targets.kind else { panic!("not a seq") };
        assert_eq!(items[0].mark, Mark::new(2, 5));
        let transport = items[0].get("transport").expect("transport");
        assert_eq!(transport.mark, Mark::new(4, 7));
        assert_eq!(transport.get("type").map(|n| n.mark), Some(Mark::new(4, 13)));
        let NodeKind::Map(entries) = &transport.kind else { panic!("not a map") };
        assert_eq!(entries[0].0.mark, Mark::new(4, 7));
    }

    #[test]
    fn columns_count_characters() {
        let node = ok("é: {ü: x}");
        let inner = node.get("é").expect("é");
        assert_eq!(inner.mark, Mark::new(1, 4));
        assert_eq!(inner.get("ü").map(|n| n.mark), Some(Mark::new(1, 8)));
    }

    #[test]
    fn empty_files() {
        for text in ["", "   ", "\n\n", "# only a comment\n", "---\n", "---\n...\n", "# c\n---\n# d\n"] {
            let e = err(text);
            assert_eq!(e.message, "the file is empty; expected a YAML mapping", "{text:?}");
            assert_eq!(e.mark, Mark::new(1, 1));
        }
        // An explicit null is not an empty file.
        assert_eq!(ok("~").kind, NodeKind::Null);
        assert_eq!(ok("--- null").kind, NodeKind::Null);
    }

    #[test]
    fn two_documents() {
        let e = err("a: 1\n---\nb: 2\n");
        assert_eq!(e.mark, Mark::new(2, 1));
        assert!(e.message.contains("second document"), "{e}");
        assert_eq!(e.to_string(), format!("line 2 column 1: {}", e.message));
        let e = err("--- a\n--- b\n");
        assert_eq!(e.mark, Mark::new(2, 1));
        // A trailing `---` starts an (empty) second document, as in PyYAML.
        assert_eq!(err("a: 1\n---\n").mark, Mark::new(2, 1));
        // `...` just ends the one document.
        assert_eq!(ok("a: 1\n...\n").to_json(), json!({"a": 1}));
    }

    #[test]
    fn syntax_errors_have_marks() {
        let e = err("a: \"unterminated");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("quoted scalar"), "{e}");
        let e = err("a:\n\tb: 1\n");
        assert_eq!(e.mark.line, 2);
        assert!(e.message.contains("tab"), "{e}");
        let e = err("a: [1, 2\nb: 3\n");
        assert!(e.mark.is_known());
    }

    #[test]
    fn non_string_keys() {
        for (text, found) in [
            ("1: a", "integer `1`"),
            ("true: a", "boolean `true`"),
            ("yes: a", "boolean `true`"),
            ("~: a", "null"),
            (": a", "null"),
            ("1.5: a", "float `1.5`"),
            ("? [a]\n: b", "a sequence"),
            ("? {a: 1}\n: b", "a mapping"),
        ] {
            let e = err(text);
            let column = if text.starts_with('?') { 3 } else { 1 };
            assert_eq!(e.mark, Mark::new(1, column), "{text:?}");
            assert!(e.message.starts_with(&format!("mapping keys must be strings, found {found}")), "{text:?}: {e}");
        }
        let e = err("a:\n  b: 1\n  2: c\n");
        assert_eq!(e.mark, Mark::new(3, 3));
        // Quoted keys are fine.
        assert_eq!(ok("'1': a\n\"true\": b").to_json(), json!({"1": "a", "true": "b"}));
    }

    #[test]
    fn duplicate_keys() {
        let e = err("a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\n");
        assert_eq!(e.mark, Mark::new(5, 3));
        assert_eq!(
            e.message,
            "duplicate key `c` (first defined at line 3 column 3); expected each key once per mapping"
        );
        // Quoting does not make a key different.
        let e = err("{a: 1, 'a': 2}");
        assert_eq!(e.mark, Mark::new(1, 8));
        // The same key in different mappings is fine.
        assert!(parse("a: {x: 1}\nb: {x: 1}").is_ok());
    }

    #[test]
    fn aliases_expand() {
        let node = ok("base: &b\n  x: 1\n  y: [a, b]\ncopy: *b\nlist: [*b, &s str, *s]\n");
        assert_eq!(
            node.to_json(),
            json!({
                "base": {"x": 1, "y": ["a", "b"]},
                "copy": {"x": 1, "y": ["a", "b"]},
                "list": [{"x": 1, "y": ["a", "b"]}, "str", "str"],
            })
        );
        // The copy's top carries the alias's mark; the inside keeps the anchored text's marks.
        let copy = node.get("copy").expect("copy");
        assert_eq!(copy.mark, Mark::new(4, 7));
        assert_eq!(copy.get("x").map(|n| n.mark), Some(Mark::new(2, 6)));
        // Aliased keys work and still count for duplicates.
        assert_eq!(ok("- &k name\n- {*k : 1}").to_json(), json!(["name", {"name": 1}]));
        let e = err("- &k name\n- {name: 1, *k : 2}");
        assert!(e.message.starts_with("duplicate key `name`"), "{e}");
        let e = err("- &k 1\n- {*k : 2}");
        assert!(e.message.starts_with("mapping keys must be strings"), "{e}");
    }

    #[test]
    fn recursive_alias_is_rejected() {
        let e = err("&a [*a]");
        assert_eq!(e.mark, Mark::new(1, 5));
        assert!(e.message.contains("recursive aliases are not supported"), "{e}");
        assert!(parse("a: *nothing").is_err());
    }

    #[test]
    fn alias_bomb_is_rejected() {
        // Each line has ten copies of the previous one: 11, 111, 1111, … nodes.
        let mut lines = vec!["a0: &a0 [x, x, x, x, x, x, x, x, x, x]".to_owned()];
        for i in 1..10 {
            let prev = vec![format!("*a{}", i - 1); 10].join(", ");
            lines.push(format!("a{i}: &a{i} [{prev}]"));
        }
        let text = lines.join("\n");
        let e = err(&text);
        assert!(e.message.contains("more than 1000000 nodes"), "{e}");
        assert_eq!(e.mark.line, 6);
        // A moderate amount of sharing is fine.
        let small = text.lines().take(4).collect::<Vec<_>>().join("\n");
        assert!(parse(&small).is_ok());
    }

    #[test]
    fn alias_text_bomb_is_rejected() {
        let big = "x".repeat(1 << 20);
        let mut text = format!("a: &a {big}\nb: [");
        for _ in 0..100 {
            text.push_str("*a, ");
        }
        text.push_str("]\n");
        let e = err(&text);
        assert!(e.message.contains("bytes of text"), "{e}");
        assert_eq!(e.mark.line, 2);
    }

    #[test]
    fn depth_limit() {
        let ok_depth = format!("{}{}", "[".repeat(MAX_DEPTH.min(250)), "]".repeat(MAX_DEPTH.min(250)));
        assert!(parse(&ok_depth).is_ok());
        // Block nesting is not limited by the scanner, so it hits our limit.
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&" ".repeat(i));
            text.push_str("- \n");
        }
        let e = err(&text);
        assert!(e.message.contains("nesting deeper than 256"), "{e}");
        assert_eq!(e.mark.line, 257);
        // Aliases cannot be used to get deeper: `a` is 200 levels deep, and the alias
        // sits at depth 41 or 61 (the root mapping counts as 1).
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let nest = |n: usize| format!("{}*deep{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&format!("a: &deep {deep}\nb: {}\n", nest(40))).is_ok());
        let e = err(&format!("a: &deep {deep}\nb: {}\n", nest(60)));
        assert!(e.message.contains("nesting deeper"), "{e}");
        assert_eq!(e.mark, Mark::new(2, 64));
    }

    #[test]
    fn nasty_inputs_do_not_panic() {
        let deep_flow = "[".repeat(100_000);
        let deep_map = "{a: ".repeat(10_000);
        let deep_block: String = (0..2000).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
        let many_anchors: String = (0..1000).map(|i| format!("- &a{i} [*a{}]\n", i.max(1) - 1)).collect();
        let inputs: Vec<String> = vec![
            "\t".into(),
            "a:\t1".into(),
            "\ta: 1".into(),
            "a: 'unterminated".into(),
            "a: \"unterminated\\".into(),
            "[".into(),
            "]".into(),
            "{".into(),
            "}".into(),
            "{a: ".into(),
            "{a: 1,,}".into(),
            "[1,,2]".into(),
            "a: b: c".into(),
            "- a\nb: c".into(),
            "a:\n- b\n  - c".into(),
            "\0".into(),
            "a: \0".into(),
            "a: \u{feff}b".into(),
            "\u{feff}a: 1".into(),
            "&".into(),
            "*".into(),
            "&a".into(),
            "*a".into(),
            "!".into(),
            "!!".into(),
            "!<>".into(),
            "%YAML 1.2\n---\na".into(),
            "%YAML 9.9\n---\na".into(),
            "%TAG ! tag:x,2000:\n--- !y z".into(),
            "%FOO bar\n---\na".into(),
            "%".into(),
            "--- |\n  a\n b".into(),
            "a: |9\n  x".into(),
            "a: >-+\n  x".into(),
            "? ".into(),
            "? a\n? a".into(),
            ": : :".into(),
            "- - - - -".into(),
            "'\\".into(),
            "\"\\x\"".into(),
            "\"\\uD800\"".into(),
            "\"\\U0011FFFF\"".into(),
            "a: 1\n---\n[".into(),
            "...".into(),
            "--- ... ---".into(),
            "a: &x 1\nb: &x 2\nc: *x".into(),
            "a: !!int".into(),
            "a: !!float".into(),
            "a: !!bool".into(),
            "a: -".into(),
            "a: 0x".into(),
            "a: 0b".into(),
            "a: 1:".into(),
            "a: :1".into(),
            "a: 1::2".into(),
            "a: 1:2:".into(),
            "a: -:1.".into(),
            "\r\n\r".into(),
            "a:\r b".into(),
            "\u{85}\u{2028}\u{2029}".into(),
            deep_flow,
            deep_map,
            deep_block,
            many_anchors,
        ];
        for input in &inputs {
            let _ = parse(input);
        }
        // Every prefix of a realistic document.
        let doc = "schema_version: 1\ntargets:\n  - id: \"x\"\n    transport: {type: stdio, command: 'a'}\n    list: [1, &a 2, *a, |\n      text\n    ]\n";
        for end in 0..=doc.len() {
            if doc.is_char_boundary(end) {
                let _ = parse(&doc[..end]);
            }
        }
    }
}
