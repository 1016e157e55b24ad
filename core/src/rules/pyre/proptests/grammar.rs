//! A generator of Python `re` patterns built only from supported constructs,
//! each with subjects that are likely to match it.
//!
//! Patterns are generated as a syntax tree ([`Node`]) and rendered to Python
//! syntax, so that they are valid by construction: quantifiers only follow
//! something repeatable, backreferences and conditionals only name groups
//! that are already closed, look-behinds are fixed-width, and global flags
//! come first. Two known differences (see the [`pyre`](super::super)
//! documentation) are avoided: backreferences are left out where
//! case-insensitive matching is in force, and a scoped `(?a:...)` loses its
//! `a` where it would start the pattern. Subjects are sampled from the tree (a string the pattern
//! would match if the sample's choices line up), then padded or mutated, so
//! that both outcomes of a search are common.

use std::fmt;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

/// Characters that patterns and subjects are mostly made of.
const COMMON: &[char] = &['a', 'b', 'c', 'A', 'B', 'C', 'k', 'K', 's', 'S', 'i', 'I', '0', '1', '9'];

/// Characters where engines tend to disagree: case folding beyond ASCII
/// (Kelvin sign, long s, dotted and dotless i, final sigma, micro sign, Ohm
/// sign, titlecase digraphs), Unicode digits, spaces and letters that are not
/// ASCII, combining marks, line separators, characters outside the BMP, and
/// characters that are special in patterns.
const RARE: &[char] = &[
    'é',
    'É',
    'ß',
    'ẞ',
    '\u{212A}',
    'ſ',
    'ı',
    'İ',
    'σ',
    'ς',
    'Σ',
    'µ',
    'μ',
    '\u{2126}',
    'ω',
    'ǅ',
    'ǆ',
    'Ǆ',
    '٣',
    '²',
    '\u{301}',
    '\u{1c}',
    '\u{a0}',
    '\u{2028}',
    '\u{1D504}',
    '\u{1F600}',
    '_',
    ' ',
    '\n',
    '\t',
    '\r',
    '-',
    '.',
    '#',
    '[',
    ']',
    '(',
    ')',
    '{',
    '}',
    '\\',
    '^',
    '$',
    '|',
    '?',
    '*',
    '+',
    '&',
    '~',
];

const ANCHORS: &[&str] = &["^", "$", r"\A", r"\Z", r"\b", r"\B"];
const CATEGORIES: &[char] = &['d', 'D', 'w', 'W', 's', 'S'];
/// Global flags, in the order they are written.
const GLOBAL_FLAGS: &[char] = &['a', 'i', 'm', 's', 'x'];
const SCOPED_FLAGS: &[&str] = &["i", "-i", "s", "-s", "m", "-m", "x", "-x", "a", "i-s", "s-i", "im", "ai", "ix"];
/// What verbose mode (`x`) ignores between tokens.
const VERBOSE_GAPS: &[&str] = &["", " ", "\n", " # comment\n", "\t"];

/// A character drawn mostly from [`COMMON`].
pub(super) fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![5 => select(COMMON), 2 => select(RARE)]
}

/// How a literal character is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spelling {
    /// As itself, with a backslash if it is special (as `re.escape` does).
    Plain,
    /// `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
    Hex,
    /// `\ooo`, for code points below 0o400 (otherwise plain).
    Octal,
    /// With a backslash unless it is an ASCII letter or digit (Python
    /// accepts a backslash before any other character).
    Escaped,
}

/// A syntax tree of a pattern.
#[derive(Debug, Clone)]
pub(super) enum Node {
    Literal(char, Spelling),
    Dot,
    Class {
        negated: bool,
        items: Vec<ClassItem>,
    },
    Category(char),
    Anchor(&'static str),
    /// `(?#...)`, which matches the empty string.
    Comment,
    Concat(Vec<Node>),
    Alternation(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        braces: bool,
        mode: &'static str,
    },
    Group(Group, Box<Node>),
    /// A fixed-width look-behind over single-character atoms.
    LookBehind {
        negated: bool,
        atoms: Vec<Node>,
    },
    /// A backreference to one of the groups closed so far (`which` modulo
    /// their number), or nothing when there is none.
    Backref {
        which: usize,
        by_name: bool,
    },
    /// A conditional on one of the groups closed so far, or a plain group
    /// when there is none.
    Conditional {
        which: usize,
        by_name: bool,
        yes: Box<Node>,
        no: Option<Box<Node>>,
    },
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Group {
    Capture,
    Named,
    NonCapturing,
    Atomic,
    LookAhead,
    NegativeLookAhead,
    Flags(&'static str),
}

#[derive(Debug, Clone)]
pub(super) enum ClassItem {
    Char(char, Spelling),
    Range(char, char),
    Category(char),
}

/// A whole pattern: global flags, then a body.
#[derive(Debug, Clone)]
pub(super) struct Pattern {
    flags: Vec<bool>,
    body: Node,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        8 => Just(Spelling::Plain),
        1 => Just(Spelling::Hex),
        1 => Just(Spelling::Octal),
        1 => Just(Spelling::Escaped),
    ]
}

fn class_item() -> impl Strategy<Value = ClassItem> {
    prop_oneof![
        4 => (any_char(), spelling()).prop_map(|(c, s)| ClassItem::Char(c, s)),
        2 => (any_char(), any_char()).prop_map(|(a, b)| ClassItem::Range(a.min(b), a.max(b))),
        1 => select(CATEGORIES).prop_map(ClassItem::Category),
    ]
}

/// A node that matches exactly one character.
fn single() -> impl Strategy<Value = Node> {
    prop_oneof![
        8 => (any_char(), spelling()).prop_map(|(c, s)| Node::Literal(c, s)),
        1 => Just(Node::Dot),
        2 => (any::<bool>(), vec(class_item(), 1..4)).prop_map(|(negated, items)| Node::Class { negated, items }),
        1 => select(CATEGORIES).prop_map(Node::Category),
    ]
}

fn leaf() -> impl Strategy<Value = Node> {
    prop_oneof![
        12 => single(),
        2 => select(ANCHORS).prop_map(Node::Anchor),
        1 => Just(Node::Comment),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(which, by_name)| Node::Backref { which, by_name }),
        1 => (any::<bool>(), vec(single(), 1..3)).prop_map(|(negated, atoms)| Node::LookBehind { negated, atoms }),
    ]
}

fn group() -> impl Strategy<Value = Group> {
    prop_oneof![
        3 => Just(Group::Capture),
        1 => Just(Group::Named),
        2 => Just(Group::NonCapturing),
        1 => Just(Group::Atomic),
        1 => Just(Group::LookAhead),
        1 => Just(Group::NegativeLookAhead),
        2 => select(SCOPED_FLAGS).prop_map(Group::Flags),
    ]
}

/// `(min, max, braces)`: `*`, `+`, `?` or a `{...}` repeat with small counts.
fn repeat_counts() -> impl Strategy<Value = (u32, Option<u32>, bool)> {
    prop_oneof![
        Just((0, None, false)),
        Just((1, None, false)),
        Just((0, Some(1), false)),
        (0..4u32, option::of(0..3u32)).prop_map(|(min, extra)| (min, extra.map(|e| min + e), true)),
        (0..4u32).prop_map(|max| (0, Some(max), true)),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            4 => vec(inner.clone(), 0..5).prop_map(Node::Concat),
            2 => vec(inner.clone(), 2..4).prop_map(Node::Alternation),
            3 => (inner.clone(), repeat_counts(), select(&["", "", "?", "+"][..])).prop_map(
                |(node, (min, max, braces), mode)| Node::Repeat { node: Box::new(node), min, max, braces, mode }
            ),
            3 => (group(), inner.clone()).prop_map(|(kind, node)| Node::Group(kind, Box::new(node))),
            1 => (any::<usize>(), any::<bool>(), inner.clone(), option::of(inner)).prop_map(
                |(which, by_name, yes, no)| Node::Conditional {
                    which,
                    by_name,
                    yes: Box::new(yes),
                    no: no.map(Box::new),
                }
            ),
        ]
    })
}

/// A pattern of supported constructs.
pub(super) fn pattern() -> impl Strategy<Value = Pattern> {
    let flags = vec(prop::bool::weighted(0.15), GLOBAL_FLAGS.len());
    (flags, vec(node(), 1..5)).prop_map(|(flags, nodes)| Pattern { flags, body: Node::Concat(nodes) })
}

/// Renders a tree as Python syntax, numbering groups as Python does.
struct Renderer {
    out: String,
    groups: usize,
    /// Closed groups, in closing order: `(number, named)`.
    closed: Vec<(usize, bool)>,
    /// Whether `(?i)` is in force.
    ignore_case: bool,
    /// Whether `(?x)` is in force, and how many gaps it has been given.
    verbose: bool,
    gaps: usize,
}

/// Python's `re.escape`: a backslash before each character that is special
/// in a pattern (outside or inside a class), or whitespace.
pub(super) fn py_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "()[]{}?*+-|^$\\.&~# \t\n\r\u{b}\u{c}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn spell(c: char, spelling: Spelling) -> String {
    let cp = u32::from(c);
    match spelling {
        Spelling::Hex if cp < 0x100 => format!("\\x{cp:02x}"),
        Spelling::Hex if cp < 0x1_0000 => format!("\\u{cp:04x}"),
        Spelling::Hex => format!("\\U{cp:08x}"),
        // Always three digits, so a following digit is never read as part of it.
        Spelling::Octal if cp < 0o400 => format!("\\{cp:03o}"),
        Spelling::Escaped if !c.is_ascii_alphanumeric() => format!("\\{c}"),
        Spelling::Octal | Spelling::Escaped | Spelling::Plain => py_escape(&c.to_string()),
    }
}

/// Whether a quantifier can follow the node as rendered, without a group.
fn is_repeatable(node: &Node) -> bool {
    match node {
        Node::Literal(..)
        | Node::Dot
        | Node::Class { .. }
        | Node::Category(_)
        | Node::Group(..)
        | Node::LookBehind { .. }
        | Node::Backref { .. }
        | Node::Conditional { .. } => true,
        Node::Anchor(_) | Node::Comment | Node::Concat(_) | Node::Alternation(_) | Node::Repeat { .. } => false,
    }
}

impl Renderer {
    fn node(&mut self, node: &Node) {
        match node {
            // Outside a class, Python reads `]` and `}` as literals.
            Node::Literal(c @ (']' | '}'), Spelling::Plain) => self.out.push(*c),
            Node::Literal(c, spelling) => self.out.push_str(&spell(*c, *spelling)),
            Node::Dot => self.out.push('.'),
            Node::Class { negated, items } => {
                self.out.push('[');
                if *negated {
                    self.out.push('^');
                }
                for (i, item) in items.iter().enumerate() {
                    match item {
                        // Python reads `]` first and `-` last as literals.
                        ClassItem::Char(']', Spelling::Plain) if i == 0 => self.out.push(']'),
                        ClassItem::Char('-', Spelling::Plain) if i + 1 == items.len() => self.out.push('-'),
                        ClassItem::Char(c, spelling) => self.out.push_str(&spell(*c, *spelling)),
                        ClassItem::Range(lo, hi) => {
                            self.out.push_str(&py_escape(&lo.to_string()));
                            self.out.push('-');
                            self.out.push_str(&py_escape(&hi.to_string()));
                        }
                        ClassItem::Category(c) => {
                            self.out.push('\\');
                            self.out.push(*c);
                        }
                    }
                }
                self.out.push(']');
            }
            Node::Category(c) => {
                self.out.push('\\');
                self.out.push(*c);
            }
            Node::Anchor(anchor) => self.out.push_str(anchor),
            Node::Comment => self.out.push_str("(?# a [comment: )"),
            Node::Concat(nodes) => {
                for node in nodes {
                    self.gap();
                    if matches!(node, Node::Alternation(_)) {
                        self.wrapped(node);
                    } else {
                        self.node(node);
                    }
                }
            }
            Node::Alternation(branches) => {
                for (i, branch) in branches.iter().enumerate() {
                    if i > 0 {
                        self.out.push('|');
                    }
                    self.node(branch);
                }
            }
            Node::Repeat { node, min, max, braces, mode } => {
                if is_repeatable(node) {
                    self.node(node);
                } else {
                    self.wrapped(node);
                }
                self.gap();
                let quantifier = match (*min, *max, *braces) {
                    (0, None, false) => "*".to_owned(),
                    (1, None, false) => "+".to_owned(),
                    (0, Some(1), false) => "?".to_owned(),
                    (0, Some(max), _) => format!("{{,{max}}}"),
                    (min, None, _) => format!("{{{min},}}"),
                    (min, Some(max), _) if min == max => format!("{{{min}}}"),
                    (min, Some(max), _) => format!("{{{min},{max}}}"),
                };
                self.out.push_str(&quantifier);
                self.out.push_str(mode);
            }
            Node::Group(kind, inner) => {
                let number = match kind {
                    Group::Capture | Group::Named => {
                        self.groups += 1;
                        Some(self.groups)
                    }
                    _ => None,
                };
                let open = match kind {
                    Group::Capture => "(".to_owned(),
                    Group::Named => format!("(?P<g{}>", self.groups),
                    Group::NonCapturing => "(?:".to_owned(),
                    Group::Atomic => "(?>".to_owned(),
                    Group::LookAhead => "(?=".to_owned(),
                    Group::NegativeLookAhead => "(?!".to_owned(),
                    Group::Flags(flags) if self.at_start() => format!("(?{}:", flags.replace('a', "")),
                    Group::Flags(flags) => format!("(?{flags}:"),
                };
                self.out.push_str(&open);
                let saved = (self.ignore_case, self.verbose);
                if let Group::Flags(flags) = kind {
                    let (on, off) = flags.split_once('-').unwrap_or((flags, ""));
                    self.ignore_case = (self.ignore_case || on.contains('i')) && !off.contains('i');
                    self.verbose = (self.verbose || on.contains('x')) && !off.contains('x');
                }
                self.node(inner);
                (self.ignore_case, self.verbose) = saved;
                self.out.push(')');
                if let Some(number) = number {
                    self.closed.push((number, matches!(kind, Group::Named)));
                }
            }
            Node::LookBehind { negated, atoms } => {
                self.out.push_str(if *negated { "(?<!" } else { "(?<=" });
                for atom in atoms {
                    self.node(atom);
                }
                self.out.push(')');
            }
            Node::Backref { which, by_name } => {
                let text = match self.closed_group(*which) {
                    // Case-insensitive backreferences differ (documented), and are left out.
                    _ if self.ignore_case => "(?:)".to_owned(),
                    Some((number, true)) if *by_name => format!("(?P=g{number})"),
                    // Grouped, so that a following literal digit is not read as part of the number.
                    Some((number, _)) => format!("(?:\\{number})"),
                    None => "(?:)".to_owned(),
                };
                self.out.push_str(&text);
            }
            Node::Conditional { which, by_name, yes, no } => {
                let open = match self.closed_group(*which) {
                    Some((number, true)) if *by_name => format!("(?(g{number})"),
                    Some((number, _)) => format!("(?({number})"),
                    None => "(?:".to_owned(),
                };
                self.out.push_str(&open);
                self.branch(yes);
                if let Some(no) = no {
                    self.out.push('|');
                    self.branch(no);
                }
                self.out.push(')');
            }
        }
    }

    /// Whether CPython's first-character check would look at what comes
    /// next: nothing has been written but global flags, comments,
    /// verbose-mode gaps, the openings of groups, and `(?:...)` groups that
    /// are empty (CPython's parser drops those).
    fn at_start(&self) -> bool {
        let mut rest = self.out.as_str();
        // Global flags, if any, come first.
        if let Some((flags, after)) = rest.strip_prefix("(?").and_then(|r| r.split_once(')'))
            && flags.chars().all(|c| c.is_ascii_lowercase())
        {
            rest = after;
        }
        // Whether each open group is a plain `(?:`, which the parser drops.
        let mut open = Vec::new();
        while !rest.is_empty() {
            rest = if let Some(after) = rest.strip_prefix([' ', '\t', '\n']) {
                after
            } else if let Some(after) = rest.strip_prefix('#').or_else(|| rest.strip_prefix("(?#")) {
                match after.split_once(['\n', ')']) {
                    Some((_, after)) => after,
                    None => return false,
                }
            } else if let Some(after) = rest.strip_prefix(')') {
                // A group closed before anything in it: only a plain one vanishes.
                if open.pop() != Some(true) {
                    return false;
                }
                after
            } else if let Some(after) = rest.strip_prefix("(?P<") {
                open.push(false);
                match after.split_once('>') {
                    Some((_, after)) => after,
                    None => return false,
                }
            } else if let Some(after) = rest.strip_prefix("(?") {
                match after.split_once(':') {
                    Some((flags, after)) if flags.chars().all(|c| c.is_ascii_lowercase() || c == '-') => {
                        open.push(flags.is_empty());
                        after
                    }
                    _ => return false,
                }
            } else if let Some(after) = rest.strip_prefix('(') {
                open.push(false);
                after
            } else {
                return false;
            };
        }
        true
    }

    /// Whitespace or a comment, where verbose mode ignores them.
    fn gap(&mut self) {
        if self.verbose {
            self.gaps += 1;
            self.out.push_str(VERBOSE_GAPS[self.gaps % VERBOSE_GAPS.len()]);
        }
    }

    fn closed_group(&self, which: usize) -> Option<(usize, bool)> {
        (!self.closed.is_empty()).then(|| self.closed[which % self.closed.len()])
    }

    fn wrapped(&mut self, node: &Node) {
        self.out.push_str("(?:");
        self.node(node);
        self.out.push(')');
    }

    /// A conditional's branch, which must not contain a top-level `|`.
    fn branch(&mut self, node: &Node) {
        if matches!(node, Node::Alternation(_)) {
            self.wrapped(node);
        } else {
            self.node(node);
        }
    }
}

impl Pattern {
    /// The pattern in Python syntax.
    pub(super) fn render(&self) -> String {
        let flags: String = GLOBAL_FLAGS.iter().zip(&self.flags).filter(|(_, on)| **on).map(|(f, _)| *f).collect();
        let prefix = if flags.is_empty() { String::new() } else { format!("(?{flags})") };
        let mut renderer = Renderer {
            out: prefix,
            groups: 0,
            closed: Vec::new(),
            ignore_case: flags.contains('i'),
            verbose: flags.contains('x'),
            gaps: 0,
        };
        renderer.node(&self.body);
        renderer.out
    }
}

/// A small deterministic generator for sampling, seeded by proptest.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        usize::try_from(x >> 33).unwrap_or(0) % n.max(1)
    }

    fn pick(&mut self, chars: &[char]) -> char {
        chars[self.below(chars.len())]
    }

    fn any(&mut self) -> char {
        if self.below(3) == 0 { self.pick(RARE) } else { self.pick(COMMON) }
    }
}

fn category_sample(c: char, rng: &mut Rng) -> char {
    let pool: &[char] = match c {
        'd' => &['0', '7', '٣'],
        'D' => &['a', '-', '²'],
        'w' => &['a', 'Z', '_', 'é', '²', '٣'],
        'W' => &['-', ' ', '\u{301}', '\n'],
        's' => &[' ', '\t', '\n', '\u{a0}', '\u{1c}'],
        _ => &['a', '-', '0'],
    };
    rng.pick(pool)
}

/// A string that the node matches if the choices line up (backreferences and
/// lookaround are not tracked).
fn sample(node: &Node, rng: &mut Rng, out: &mut String) {
    match node {
        Node::Literal(c, _) => {
            // Sometimes the other case, for case-insensitive patterns.
            let flipped: Vec<char> =
                if c.is_lowercase() { c.to_uppercase().collect() } else { c.to_lowercase().collect() };
            if rng.below(4) == 0 && flipped.len() == 1 {
                out.push(flipped[0]);
            } else {
                out.push(*c);
            }
        }
        Node::Dot => out.push(rng.any()),
        Node::Class { negated: true, .. } => out.push(rng.any()),
        Node::Class { negated: false, items } => match &items[rng.below(items.len())] {
            ClassItem::Char(c, _) => out.push(*c),
            ClassItem::Range(lo, hi) => {
                let span = u32::from(*hi) - u32::from(*lo);
                let offset = u32::try_from(rng.below(usize::try_from(span).unwrap_or(0) + 1)).unwrap_or(0);
                out.push(char::from_u32(u32::from(*lo) + offset).unwrap_or(*lo));
            }
            ClassItem::Category(c) => out.push(category_sample(*c, rng)),
        },
        Node::Category(c) => out.push(category_sample(*c, rng)),
        Node::Anchor(_) | Node::Comment | Node::LookBehind { .. } | Node::Backref { .. } => {}
        Node::Concat(nodes) => nodes.iter().for_each(|n| sample(n, rng, out)),
        Node::Alternation(branches) => sample(&branches[rng.below(branches.len())], rng, out),
        Node::Repeat { node, min, max, .. } => {
            let extra = max.map_or(2, |max| max - min).min(2);
            let times = *min as usize + rng.below(extra as usize + 1);
            (0..times).for_each(|_| sample(node, rng, out));
        }
        Node::Group(Group::LookAhead | Group::NegativeLookAhead, _) => {}
        Node::Group(_, inner) => sample(inner, rng, out),
        Node::Conditional { yes, no, .. } => match no {
            Some(no) if rng.below(2) == 0 => sample(no, rng, out),
            _ => sample(yes, rng, out),
        },
    }
}

/// How to make one subject from a pattern.
#[derive(Debug, Clone)]
struct SubjectRecipe {
    seed: u64,
    prefix: Vec<char>,
    suffix: Vec<char>,
    /// 0: a sample; 1: a sample with one character changed; 2: random text.
    kind: u8,
    random: Vec<char>,
}

fn subject_recipe() -> impl Strategy<Value = SubjectRecipe> {
    (any::<u64>(), vec(any_char(), 0..3), vec(any_char(), 0..3), 0..3u8, vec(any_char(), 0..8))
        .prop_map(|(seed, prefix, suffix, kind, random)| SubjectRecipe { seed, prefix, suffix, kind, random })
}

impl SubjectRecipe {
    fn make(&self, pattern: &Pattern) -> String {
        if self.kind == 2 {
            return self.random.iter().collect();
        }
        let mut rng = Rng(self.seed | 1);
        let mut core = String::new();
        sample(&pattern.body, &mut rng, &mut core);
        let mut chars: Vec<char> = core.chars().take(24).collect();
        if self.kind == 1 && !chars.is_empty() {
            let at = rng.below(chars.len());
            if rng.below(2) == 0 {
                chars.remove(at);
            } else {
                chars[at] = rng.any();
            }
        }
        self.prefix.iter().chain(&chars).chain(&self.suffix).collect()
    }
}

/// A generated pattern (Python syntax) with subjects to search.
#[derive(Clone)]
pub(super) struct Case {
    pub(super) pattern: String,
    pub(super) subjects: Vec<String>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} on {:?}", self.pattern, self.subjects)
    }
}

/// A pattern of supported constructs with `subjects` subjects.
pub(super) fn case(subjects: usize) -> impl Strategy<Value = Case> {
    (pattern(), vec(subject_recipe(), subjects)).prop_map(|(pattern, recipes)| Case {
        pattern: pattern.render(),
        subjects: recipes.iter().map(|recipe| recipe.make(&pattern)).collect(),
    })
}
