//! The translator: Python `re` syntax in, `fancy-regex` syntax out.
//!
//! It follows the structure of CPython's `re._parser`, so that the same
//! patterns are accepted and rejected, with the same messages: one pass over
//! the pattern's characters with a stack of open groups (`Frame`), each
//! construct re-emitted as soon as it is parsed. What a following quantifier
//! may do with the last element emitted in a branch (repeat it, rewrite it, or
//! reject it with "nothing to repeat" or "multiple repeat") is tracked as an
//! `Item`; the inline flags in force are a `Flags`.
//!
//! * this module: the state, the main loop, literals (with case folding),
//!   alternation and repeats;
//! * `escape`: escapes outside a character class, categories and word
//!   boundaries;
//! * `class`: character classes;
//! * `group`: groups, backreferences by name, lookaround, conditionals,
//!   comments and inline flags.
//!
//! Errors are plain messages (`Translation`); the caller wraps them in a
//! [`PatternError`](super::PatternError) with the pattern.

mod class;
mod escape;
mod group;

use std::collections::HashMap;

/// Python's inline flags, as they apply at a point of the pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flags {
    ignore_case: bool,
    multiline: bool,
    dotall: bool,
    verbose: bool,
    ascii: bool,
    unicode: bool,
}

impl Flags {
    fn set(&mut self, flag: char, on: bool) {
        match flag {
            'i' => self.ignore_case = on,
            'm' => self.multiline = on,
            's' => self.dotall = on,
            'x' => self.verbose = on,
            'a' => self.ascii = on,
            'u' => self.unicode = on,
            _ => {}
        }
    }

    /// Whether `fancy-regex`'s own case folding applies. Under `(?a)` Python
    /// folds ASCII letters only, which the translation spells out instead.
    const fn fancy_ignore_case(self) -> bool {
        self.ignore_case && !self.ascii
    }

    fn any_common(self, other: Self) -> bool {
        (self.ignore_case && other.ignore_case)
            || (self.multiline && other.multiline)
            || (self.dotall && other.dotall)
            || (self.verbose && other.verbose)
    }
}

/// What kind of element was last emitted in a branch: this decides what a
/// following quantifier does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// Repeatable as is.
    Atom,
    /// Zero-width and not repeatable by `fancy-regex` (a lookaround, or a
    /// plain group around one): a quantifier is rewritten.
    ZeroWidth,
    /// A plain group with nothing in it, which `fancy-regex` drops from its
    /// syntax tree: a quantifier is rewritten, and it does not count when
    /// deciding whether an enclosing group is zero-width.
    Empty,
    /// Python's `AT` codes (`^ $ \A \Z \b \B`): "nothing to repeat".
    Anchor,
    /// Already quantified: "multiple repeat".
    Repeat,
    /// A quantified `ZeroWidth` item that is still a bare lookaround in the
    /// output: "multiple repeat", and zero-width for an enclosing group.
    ZeroWidthRepeat,
    /// A quantified `Empty` item that is still empty: "multiple repeat", and
    /// empty for an enclosing group.
    EmptyRepeat,
}

impl Item {
    /// Whether `fancy-regex` drops the item (so it does not count).
    const fn is_empty(self) -> bool {
        matches!(self, Self::Empty | Self::EmptyRepeat)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    Top,
    Capture(usize),
    /// `(?:...)` or `(?flags:...)`.
    Plain,
    Lookaround,
    Atomic,
    Conditional,
}

#[derive(Debug)]
struct Frame {
    kind: GroupKind,
    /// Flags to restore when the group closes.
    saved: Flags,
    /// Character position of the opening `(`, for messages.
    at: usize,
    /// Byte offset in the output where the group starts.
    out_start: usize,
    branches: usize,
    /// Items in the current branch (Python's count, for global flags).
    items: usize,
    /// Items in the current branch that are not `Item::is_empty`, and the
    /// kind of the last of them.
    solid_items: usize,
    last_solid: Option<Item>,
    /// The last item of the current branch and its output offset.
    last: Option<(Item, usize)>,
    /// Output offset where the current branch's text starts.
    branch_start: usize,
    /// Capture groups opened before the frame's contents: the groups nested
    /// in it are those numbered above.
    first_group: usize,
}

/// A class that matches nothing: what a surrogate code point becomes.
/// The refusal of a named character escape (`\N{...}`), which Python accepts.
pub(super) const NAMED_ESCAPE_UNSUPPORTED: &str = "named unicode escapes (\\N{...}) are not supported; use \\u or \\U";
/// The refusal of the deprecated template flag, which Python accepts.
pub(super) const TEMPLATE_UNSUPPORTED: &str = "the deprecated template flag 't' is not supported";

/// Whether a refusal of [`translate`] is of a pattern Python accepts (a construct this
/// translation does not support), not one Python rejects too.
pub(super) fn python_accepts(message: &str) -> bool {
    message == NAMED_ESCAPE_UNSUPPORTED || message == TEMPLATE_UNSUPPORTED
}

const NEVER: &str = r"[^\x{0}-\x{10FFFF}]";
const PY_WORD: &str = r"[\p{L}\p{N}_]";
const ASCII_WORD: &str = "[0-9A-Za-z_]";
/// The letters CPython's `(?i)` treats as one case class.
const TURKISH_I: &str = r"iI\x{130}\x{131}";

fn is_verbose_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// A code point as a `fancy-regex` literal that is unambiguous anywhere
/// (inside or outside a class, after any construct). `None` for surrogates.
fn literal_text(cp: u32) -> Option<String> {
    let c = char::from_u32(cp)?;
    Some(if c.is_alphanumeric() || c == '_' { c.to_string() } else { format!("\\x{{{cp:X}}}") })
}

fn quantifier_text(lo: u64, hi: Option<u64>) -> String {
    match (lo, hi) {
        (0, None) => "*".to_owned(),
        (1, None) => "+".to_owned(),
        (0, Some(1)) => "?".to_owned(),
        (lo, None) => format!("{{{lo},}}"),
        (lo, Some(hi)) if lo == hi => format!("{{{lo}}}"),
        (lo, Some(hi)) => format!("{{{lo},{hi}}}"),
    }
}

/// Python's `MAXREPEAT`: repeat counts must stay below it.
const MAX_REPEAT: u64 = 4_294_967_295;

/// Translates Python `re` syntax to `fancy-regex` syntax, following the
/// structure of CPython's `re._parser` so that the same patterns are
/// accepted and rejected.
struct Translator {
    src: Vec<char>,
    pos: usize,
    out: String,
    flags: Flags,
    frames: Vec<Frame>,
    /// Capture groups opened so far.
    groups: usize,
    /// `closed[g]` once group `g` has been closed (index 0 unused).
    closed: Vec<bool>,
    /// `alternated[g]` when group `g` is in a branch of an alternation
    /// (index 0 unused).
    alternated: Vec<bool>,
    /// Groups that conditionals test.
    conditioned: Vec<usize>,
    names: HashMap<String, usize>,
    /// Numeric conditional references, checked against the final group
    /// count: `(group, position)`.
    conditional_refs: Vec<(usize, usize)>,
}

type Translation<T> = Result<T, String>;

/// Translates `pattern`, or says why Python (or this translation) rejects it.
pub(super) fn translate(pattern: &str) -> Translation<String> {
    Translator::new(pattern).run()
}

impl Translator {
    fn new(pattern: &str) -> Self {
        Self {
            src: pattern.chars().collect(),
            pos: 0,
            out: String::with_capacity(pattern.len() * 2),
            flags: Flags::default(),
            frames: vec![Frame {
                kind: GroupKind::Top,
                saved: Flags::default(),
                at: 0,
                out_start: 0,
                branches: 1,
                items: 0,
                solid_items: 0,
                last_solid: None,
                last: None,
                branch_start: 0,
                first_group: 0,
            }],
            groups: 0,
            closed: vec![true],
            alternated: vec![false],
            conditioned: Vec::new(),
            names: HashMap::new(),
            conditional_refs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Like `bump`, but a backslash and the character after it are one
    /// token, as in CPython's tokenizer: a backslash is returned and its
    /// partner skipped, so an escaped `)` or newline does not end a comment.
    fn bump_token(&mut self) -> Option<char> {
        let c = self.bump()?;
        if c == '\\' {
            self.pos += 1;
        }
        Some(c)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn frame(&mut self) -> &mut Frame {
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn run(mut self) -> Translation<String> {
        // CPython's tokenizer pairs every backslash with the next character
        // before parsing, so a final unpaired backslash is an error anywhere,
        // even inside a comment.
        let mut chars = self.src.iter();
        while let Some(c) = chars.next() {
            if *c == '\\' && chars.next().is_none() {
                return Err("bad escape (end of pattern)".to_owned());
            }
        }
        while let Some(c) = self.peek() {
            let at = self.pos;
            self.pos += 1;
            match c {
                '|' => self.alternation(at)?,
                ')' => self.close_group(at)?,
                _ if self.flags.verbose && is_verbose_whitespace(c) => {}
                '#' if self.flags.verbose => while self.bump_token().is_some_and(|c| c != '\n') {},
                '\\' => self.escape()?,
                '[' => self.class(at)?,
                '*' => self.quantify(at, 0, None)?,
                '+' => self.quantify(at, 1, None)?,
                '?' => self.quantify(at, 0, Some(1))?,
                '{' => self.brace(at)?,
                '.' => {
                    let text = if self.flags.dotall { "(?s:.)" } else { "." };
                    self.push_item(Item::Atom, text);
                }
                '(' => self.open_group(at)?,
                '^' => {
                    let text = if self.flags.multiline { "(?m:^)" } else { r"\A" };
                    self.push_item(Item::Anchor, text);
                }
                '$' => {
                    let text = if self.flags.multiline { "(?m:$)" } else { r"(?=\n?\z)" };
                    self.push_item(Item::Anchor, text);
                }
                _ => self.push_literal(u32::from(c)),
            }
        }
        if self.frames.len() > 1 {
            let at = self.frame().at;
            return Err(format!("missing ), unterminated subpattern at position {at}"));
        }
        if let Some((group, at)) = self.conditional_refs.iter().find(|(group, _)| *group > self.groups) {
            return Err(format!("invalid group reference {group} at position {at}"));
        }
        if self.flags.ascii && self.flags.unicode {
            return Err("ASCII and UNICODE flags are incompatible".to_owned());
        }
        if self.frame().branches > 1 {
            self.mark_alternated(0);
        }
        self.mark_conditioned_groups_hard();
        if self.flags.fancy_ignore_case() {
            self.out.insert_str(0, "(?i)");
        }
        Ok(self.out)
    }

    /// Records that the groups numbered above `first_group` are in a branch
    /// of an alternation.
    fn mark_alternated(&mut self, first_group: usize) {
        for alternated in self.alternated.iter_mut().skip(first_group + 1) {
            *alternated = true;
        }
    }

    /// `fancy-regex` hands a fixed-length run of the pattern without
    /// backreferences or lookaround to the `regex` crate, which commits to
    /// the first way it matches and does not backtrack into it, although
    /// another way (`(?:x|(x))`) may leave different groups set. It knows
    /// that a backreference makes its group's alternatives matter, but not
    /// that a conditional does: `(?:x|(x))(?(1)a|b)` does not match `"xa"`.
    /// A backreference that never runs, `(?:\k<g>){0}` at the end, makes it
    /// keep the choices of each group that a conditional tests and that is
    /// in a branch of an alternation.
    fn mark_conditioned_groups_hard(&mut self) {
        self.conditioned.sort_unstable();
        self.conditioned.dedup();
        for &group in &self.conditioned {
            if self.alternated.get(group).copied().unwrap_or(false) {
                self.out.push_str(r"(?:\k<");
                self.out.push_str(&group.to_string());
                self.out.push_str(">){0}");
            }
        }
    }

    fn push_item(&mut self, item: Item, text: &str) {
        let start = self.out.len();
        self.out.push_str(text);
        self.register_item(item, start);
    }

    /// Records a new item, emitted from output offset `start`, in the
    /// current branch.
    fn register_item(&mut self, item: Item, start: usize) {
        let frame = self.frame();
        frame.items += 1;
        frame.last = Some((item, start));
        if !item.is_empty() {
            frame.solid_items += 1;
            frame.last_solid = Some(item);
        }
    }

    fn push_literal(&mut self, cp: u32) {
        let text = self.case_insensitive_literal(cp).or_else(|| literal_text(cp)).unwrap_or_else(|| NEVER.to_owned());
        self.push_item(Item::Atom, &text);
    }

    /// A literal that `fancy-regex`'s case folding would get wrong under
    /// `(?i)`, spelled out as a class: ASCII letters under `(?a)`, and the
    /// Turkish i letters `i I İ ı`, which CPython treats as one case class
    /// (the only difference between its case folding and Unicode simple
    /// case folding).
    fn case_insensitive_literal(&self, cp: u32) -> Option<String> {
        if !self.flags.ignore_case {
            return None;
        }
        let c = char::from_u32(cp)?;
        if self.flags.ascii {
            c.is_ascii_alphabetic().then(|| format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase()))
        } else {
            matches!(c, 'i' | 'I' | '\u{130}' | '\u{131}').then(|| format!("[{TURKISH_I}]"))
        }
    }

    /// Wraps a synthesized construct so that an active `(?i)` does not case
    /// fold it (Python does not fold categories or boundaries).
    fn case_sensitive(&self, text: &str) -> String {
        if self.flags.fancy_ignore_case() { format!("(?-i:{text})") } else { text.to_owned() }
    }

    fn alternation(&mut self, at: usize) -> Translation<()> {
        let frame = self.frame();
        if frame.kind == GroupKind::Conditional {
            if frame.branches >= 2 {
                return Err(format!("conditional backref with more than two branches at position {at}"));
            }
            self.guard_conditional_yes_branch();
        }
        let branch_start = self.out.len() + 1;
        let frame = self.frame();
        frame.branches += 1;
        frame.items = 0;
        frame.solid_items = 0;
        frame.last_solid = None;
        frame.last = None;
        frame.branch_start = branch_start;
        self.out.push('|');
        Ok(())
    }

    /// `fancy-regex` reads a conditional whose branches are both empty, such
    /// as `(?(1))` or `(?(1)|)`, as "fail unless group 1 matched", whereas in
    /// Python it always matches the empty string. Starting an empty-looking
    /// yes branch with `(?=)`, which matches the empty string, keeps the
    /// Python meaning. Called when the yes branch ends.
    fn guard_conditional_yes_branch(&mut self) {
        let start = self.frame().branch_start;
        let looks_empty = self.out[start..].chars().all(|c| matches!(c, '(' | ')' | '?' | ':' | '|' | 'i' | '-'));
        if looks_empty {
            self.out.insert_str(start, "(?=)");
        }
    }

    fn quantify(&mut self, at: usize, lo: u64, hi: Option<u64>) -> Translation<()> {
        let (item, start) = match self.frame().last {
            None | Some((Item::Anchor, _)) => {
                return Err(format!("nothing to repeat at position {at}"));
            }
            Some((Item::Repeat | Item::ZeroWidthRepeat | Item::EmptyRepeat, _)) => {
                return Err(format!("multiple repeat at position {at}"));
            }
            Some(last) => last,
        };
        let mode = if self.eat('?') {
            "?"
        } else if self.eat('+') {
            "+"
        } else {
            ""
        };
        let mut repeated = Item::Repeat;
        if matches!(item, Item::ZeroWidth | Item::Empty) {
            // `fancy-regex` refuses to repeat a lookaround or an empty group.
            // Repeating something zero-width is the same as doing it at most
            // once, so rewrite to an equivalent that keeps any groups inside.
            if lo > 0 && hi != Some(0) {
                repeated = if item == Item::Empty { Item::EmptyRepeat } else { Item::ZeroWidthRepeat };
            }
            let inner = self.out.split_off(start);
            let rewritten = if hi == Some(0) {
                format!("(?:(?!){inner}|)")
            } else if lo > 0 {
                inner
            } else {
                match mode {
                    "?" => format!("(?:|{inner})"),
                    "+" => format!("(?>{inner}|)"),
                    _ => format!("(?:{inner}|)"),
                }
            };
            self.out.push_str(&rewritten);
        } else {
            if mode == "+" && self.out[start..].starts_with('(') {
                // CPython matches each iteration of a possessive repeat
                // atomically too: `(?:a|^){2}+` fails on "a" although
                // `(?>(?:a|^){2})` matches.
                self.out.insert_str(start, "(?>");
                self.out.push(')');
            }
            self.out.push_str(&quantifier_text(lo, hi));
            self.out.push_str(mode);
        }
        let frame = self.frame();
        frame.last = Some((repeated, start));
        match (item.is_empty(), repeated.is_empty()) {
            (true, true) => {}
            (true, false) => {
                frame.solid_items += 1;
                frame.last_solid = Some(repeated);
            }
            (false, _) => frame.last_solid = Some(repeated),
        }
        Ok(())
    }

    fn take_digits(&mut self) -> String {
        let mut digits = String::new();
        while let Some(c) = self.peek().filter(char::is_ascii_digit) {
            digits.push(c);
            self.pos += 1;
        }
        digits
    }

    fn brace(&mut self, at: usize) -> Translation<()> {
        if self.peek() == Some('}') {
            self.push_literal(u32::from('{'));
            return Ok(());
        }
        let resume = self.pos;
        let lo_digits = self.take_digits();
        let hi_digits = if self.eat(',') { Some(self.take_digits()) } else { None };
        if !self.eat('}') {
            // Not a repeat: Python reads the `{` as a literal.
            self.pos = resume;
            self.push_literal(u32::from('{'));
            return Ok(());
        }
        let count = |digits: &str| -> Translation<u64> {
            digits
                .parse::<u64>()
                .ok()
                .filter(|n| *n < MAX_REPEAT)
                .ok_or_else(|| "the repetition number is too large".to_owned())
        };
        let lo = if lo_digits.is_empty() { 0 } else { count(&lo_digits)? };
        let hi = match hi_digits {
            None => Some(lo),
            Some(digits) if digits.is_empty() => None,
            Some(digits) => Some(count(&digits)?),
        };
        if hi.is_some_and(|hi| hi < lo) {
            return Err(format!("min repeat greater than max repeat at position {}", at + 1));
        }
        self.quantify(at, lo, hi)
    }
}
