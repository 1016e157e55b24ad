//! Character classes: `[...]` and `[^...]`, with Python's parsing of `]`, `-`
//! and escapes, Python's categories, and the members CPython's case folding
//! adds under `(?i)`.

use super::{Item, NEVER, TURKISH_I, Translation, Translator, literal_text};

/// One element of a character class.
#[derive(Debug, Clone, Copy)]
enum ClassAtom {
    /// A code point (possibly a surrogate, which no Rust string contains).
    Literal(u32),
    /// `\d \D \s \S \w \W`.
    Category(char),
}

impl Translator {
    /// Members to add to a class under `(?i)` so that it matches what CPython
    /// matches; `spans` are the class's literal characters and ranges.
    fn case_insensitive_class_extras(&self, spans: &[(u32, u32)]) -> String {
        let mut extras = String::new();
        if !self.flags.ignore_case {
            return extras;
        }
        if self.flags.ascii {
            for &(lo, hi) in spans {
                for (start, end, shifted) in [(0x41, 0x5A, 0x61), (0x61, 0x7A, 0x41)] {
                    let (from, to) = (lo.max(start), hi.min(end));
                    if from <= to {
                        push_class_range(&mut extras, from - start + shifted, to - start + shifted);
                    }
                }
            }
        } else {
            let covers = |cp: u32| spans.iter().any(|&(lo, hi)| lo <= cp && cp <= hi);
            if [0x49, 0x69, 0x130, 0x131].into_iter().any(covers) {
                extras.push_str(TURKISH_I);
            }
        }
        extras
    }

    /// An escape inside a class; the backslash is consumed.
    fn class_escape(&mut self) -> Translation<ClassAtom> {
        let Some(c) = self.bump() else {
            return Err("bad escape (end of pattern)".to_owned());
        };
        Ok(match c {
            'a' => ClassAtom::Literal(0x07),
            'b' => ClassAtom::Literal(0x08),
            'f' => ClassAtom::Literal(0x0C),
            'n' => ClassAtom::Literal(0x0A),
            'r' => ClassAtom::Literal(0x0D),
            't' => ClassAtom::Literal(0x09),
            'v' => ClassAtom::Literal(0x0B),
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => ClassAtom::Category(c),
            'x' => ClassAtom::Literal(self.hex_escape('x', 2)?),
            'u' => ClassAtom::Literal(self.hex_escape('u', 4)?),
            'U' => ClassAtom::Literal(self.hex_escape('U', 8)?),
            'N' => {
                return Err(super::NAMED_ESCAPE_UNSUPPORTED.to_owned());
            }
            '0'..='7' => ClassAtom::Literal(self.octal_escape(c, 2)?),
            c if c.is_ascii_alphanumeric() => return Err(format!("bad escape \\{c}")),
            c => ClassAtom::Literal(u32::from(c)),
        })
    }

    fn class_category(&self, c: char) -> &'static str {
        match (c, self.flags.ascii) {
            ('d', false) => r"\d",
            ('D', false) => r"\D",
            ('s', false) => r"\s\x{1C}-\x{1F}",
            ('S', false) => r"[^\s\x{1C}-\x{1F}]",
            ('w', false) => r"\p{L}\p{N}_",
            ('W', false) => r"[^\p{L}\p{N}_]",
            ('d', true) => "0-9",
            ('D', true) => "[^0-9]",
            ('s', true) => r"\x{9}-\x{D}\x{20}",
            ('S', true) => r"[^\x{9}-\x{D}\x{20}]",
            ('w', true) => "0-9A-Za-z_",
            _ => "[^0-9A-Za-z_]",
        }
    }

    pub(super) fn class(&mut self, at: usize) -> Translation<()> {
        let negate = self.eat('^');
        let mut body = String::new();
        let mut spans = Vec::new();
        let mut seen_item = false;
        let unterminated = || format!("unterminated character set at position {at}");
        loop {
            let item_at = self.pos;
            let Some(c) = self.bump() else {
                return Err(unterminated());
            };
            if c == ']' && seen_item {
                break;
            }
            let first = if c == '\\' { self.class_escape()? } else { ClassAtom::Literal(u32::from(c)) };
            let first_end = self.pos;
            if self.eat('-') {
                let Some(d) = self.bump() else {
                    return Err(unterminated());
                };
                if d == ']' {
                    self.push_class_atom(&mut body, &mut spans, first);
                    self.push_class_atom(&mut body, &mut spans, ClassAtom::Literal(u32::from('-')));
                    break;
                }
                let second_at = self.pos - 1;
                let second = if d == '\\' { self.class_escape()? } else { ClassAtom::Literal(u32::from(d)) };
                let bad_range = || {
                    let this: String = self.src[item_at..first_end].iter().collect();
                    let that: String = self.src[second_at..self.pos].iter().collect();
                    format!("bad character range {this}-{that} at position {item_at}")
                };
                match (first, second) {
                    (ClassAtom::Literal(lo), ClassAtom::Literal(hi)) if lo <= hi => {
                        push_class_range(&mut body, lo, hi);
                        spans.push((lo, hi));
                    }
                    _ => return Err(bad_range()),
                }
            } else {
                self.push_class_atom(&mut body, &mut spans, first);
            }
            seen_item = true;
        }
        body.push_str(&self.case_insensitive_class_extras(&spans));
        let text = match (body.is_empty(), negate) {
            // Only surrogates, which no string contains.
            (true, false) => NEVER.to_owned(),
            (true, true) => r"(?s:.)".to_owned(),
            (false, false) => format!("[{body}]"),
            (false, true) => format!("[^{body}]"),
        };
        self.push_item(Item::Atom, &text);
        Ok(())
    }

    fn push_class_atom(&self, body: &mut String, spans: &mut Vec<(u32, u32)>, atom: ClassAtom) {
        match atom {
            ClassAtom::Literal(cp) => {
                spans.push((cp, cp));
                if let Some(text) = literal_text(cp) {
                    body.push_str(&text);
                }
            }
            ClassAtom::Category(c) => body.push_str(self.class_category(c)),
        }
    }
}

/// Adds `lo-hi` to a class body, leaving out surrogate endpoints.
fn push_class_range(body: &mut String, lo: u32, hi: u32) {
    let lo = if is_surrogate(lo) { 0xE000 } else { lo };
    let hi = if is_surrogate(hi) { 0xD7FF } else { hi };
    if lo > hi {
        return;
    }
    if let (Some(lo), Some(hi)) = (literal_text(lo), literal_text(hi)) {
        body.push_str(&lo);
        body.push('-');
        body.push_str(&hi);
    }
}

fn is_surrogate(cp: u32) -> bool {
    (0xD800..=0xDFFF).contains(&cp)
}
