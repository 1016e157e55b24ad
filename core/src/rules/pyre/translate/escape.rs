//! Escapes outside a character class (`\n`, `\x41`, `\1`, `\d`, `\b`, ...),
//! with the categories and word boundaries spelled in Python's definitions.
//!
//! Hexadecimal and octal escapes are shared with [`super::class`], which
//! reads the escapes inside a class.

use super::{ASCII_WORD, Item, PY_WORD, Translation, Translator};

/// An escape outside a character class.
enum Escape {
    Literal(u32),
    Category(char),
    Anchor(char),
    Backref(usize),
}

impl Translator {
    pub(super) fn hex_escape(&mut self, letter: char, width: usize) -> Translation<u32> {
        let mut digits = String::new();
        while digits.len() < width {
            match self.peek().filter(char::is_ascii_hexdigit) {
                Some(c) => {
                    digits.push(c);
                    self.pos += 1;
                }
                None => break,
            }
        }
        if digits.len() != width {
            return Err(format!("incomplete escape \\{letter}{digits}"));
        }
        match u32::from_str_radix(&digits, 16) {
            Ok(cp) if cp <= 0x10_FFFF => Ok(cp),
            _ => Err(format!("bad escape \\{letter}{digits}")),
        }
    }

    /// Reads up to `more` further octal digits after `first`.
    pub(super) fn octal_escape(&mut self, first: char, more: usize) -> Translation<u32> {
        let mut digits = String::from(first);
        for _ in 0..more {
            match self.peek().filter(|c| ('0'..='7').contains(c)) {
                Some(c) => {
                    digits.push(c);
                    self.pos += 1;
                }
                None => break,
            }
        }
        match u32::from_str_radix(&digits, 8) {
            Ok(cp) if cp <= 0o377 => Ok(cp),
            _ => Err(format!("octal escape value \\{digits} outside of range 0-0o377")),
        }
    }

    /// An escape outside a class; the backslash is consumed.
    fn read_escape(&mut self) -> Translation<Escape> {
        let at = self.pos - 1;
        let Some(c) = self.bump() else {
            return Err("bad escape (end of pattern)".to_owned());
        };
        Ok(match c {
            'A' | 'Z' | 'b' | 'B' => Escape::Anchor(c),
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => Escape::Category(c),
            'a' => Escape::Literal(0x07),
            'f' => Escape::Literal(0x0C),
            'n' => Escape::Literal(0x0A),
            'r' => Escape::Literal(0x0D),
            't' => Escape::Literal(0x09),
            'v' => Escape::Literal(0x0B),
            'x' => Escape::Literal(self.hex_escape('x', 2)?),
            'u' => Escape::Literal(self.hex_escape('u', 4)?),
            'U' => Escape::Literal(self.hex_escape('U', 8)?),
            'N' => {
                return Err(super::NAMED_ESCAPE_UNSUPPORTED.to_owned());
            }
            '0' => Escape::Literal(self.octal_escape('0', 2)?),
            '1'..='9' => {
                let mut digits = String::from(c);
                if let Some(second) = self.peek().filter(char::is_ascii_digit) {
                    self.pos += 1;
                    digits.push(second);
                    let is_octal = |d: char| ('0'..='7').contains(&d);
                    if is_octal(c) && is_octal(second) && self.peek().is_some_and(is_octal) {
                        self.pos += 1;
                        let cp = u32::from_str_radix(&self.src[at + 1..self.pos].iter().collect::<String>(), 8)
                            .map_err(|e| e.to_string())?;
                        if cp > 0o377 {
                            let text: String = self.src[at..self.pos].iter().collect();
                            return Err(format!("octal escape value {text} outside of range 0-0o377"));
                        }
                        return Ok(Escape::Literal(cp));
                    }
                }
                let group: usize = digits.parse().map_err(|_| "bad escape".to_owned())?;
                if group > self.groups {
                    return Err(format!("invalid group reference {group} at position {}", at + 1));
                }
                if !self.closed[group] {
                    return Err(format!("cannot refer to an open group at position {at}"));
                }
                Escape::Backref(group)
            }
            c if c.is_ascii_alphabetic() => return Err(format!("bad escape \\{c} at position {at}")),
            c => Escape::Literal(u32::from(c)),
        })
    }

    fn category_outside_class(&self, c: char) -> String {
        let text = match (c, self.flags.ascii) {
            ('d', false) => r"\d",
            ('D', false) => r"\D",
            ('s', false) => r"[\s\x{1C}-\x{1F}]",
            ('S', false) => r"[^\s\x{1C}-\x{1F}]",
            ('w', false) => PY_WORD,
            ('W', false) => r"[^\p{L}\p{N}_]",
            ('d', true) => "[0-9]",
            ('D', true) => "[^0-9]",
            ('s', true) => r"[\x{9}-\x{D}\x{20}]",
            ('S', true) => r"[^\x{9}-\x{D}\x{20}]",
            ('w', true) => ASCII_WORD,
            _ => "[^0-9A-Za-z_]",
        };
        self.case_sensitive(text)
    }

    fn word_boundary(&self, negated: bool) -> String {
        let w = if self.flags.ascii { ASCII_WORD } else { PY_WORD };
        let text = if negated {
            // Python (before 3.14) never matches `\B` in an empty string.
            format!("(?:(?<={w})(?={w})|(?<!{w})(?!{w})(?s:(?<=.)|(?=.)))")
        } else {
            format!("(?:(?<={w})(?!{w})|(?<!{w})(?={w}))")
        };
        self.case_sensitive(&text)
    }

    pub(super) fn escape(&mut self) -> Translation<()> {
        match self.read_escape()? {
            Escape::Literal(cp) => self.push_literal(cp),
            Escape::Category(c) => {
                let text = self.category_outside_class(c);
                self.push_item(Item::Atom, &text);
            }
            Escape::Anchor(c) => {
                let text = match c {
                    'A' => r"\A".to_owned(),
                    'Z' => r"\z".to_owned(),
                    'b' => self.word_boundary(false),
                    _ => self.word_boundary(true),
                };
                self.push_item(Item::Anchor, &text);
            }
            Escape::Backref(group) => self.push_item(Item::Atom, &format!(r"\k<{group}>")),
        }
        Ok(())
    }
}
