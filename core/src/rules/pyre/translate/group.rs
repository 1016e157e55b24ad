//! Groups: capturing, named and non-capturing groups, backreferences by name,
//! lookaround, atomic groups, conditionals, comments and inline flags.
//!
//! Named groups are resolved here, so the output only has numbered groups
//! (`fancy-regex` numbers groups as Python does).

use super::{Flags, Frame, GroupKind, Item, Translation, Translator};

// CPython's deprecated TEMPLATE flag forbids every repeat; it is not worth supporting.
use super::TEMPLATE_UNSUPPORTED;

fn is_flag_char(c: char) -> bool {
    "aiLmsuxt".contains(c)
}

/// An approximation of Python's `str.isidentifier()`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

impl Translator {
    fn group_name(&mut self, terminator: char) -> Translation<String> {
        let mut name = String::new();
        loop {
            match self.bump_token() {
                None if name.is_empty() => return Err("missing group name".to_owned()),
                None => return Err(format!("missing {terminator}, unterminated name")),
                Some(c) if c == terminator => break,
                Some(c) => name.push(c),
            }
        }
        if name.is_empty() {
            return Err("missing group name".to_owned());
        }
        Ok(name)
    }

    fn checked_group_name(&mut self, terminator: char) -> Translation<String> {
        let name = self.group_name(terminator)?;
        if is_identifier(&name) { Ok(name) } else { Err(format!("bad character in group name '{name}'")) }
    }

    fn open_frame(&mut self, kind: GroupKind, at: usize, text: &str) {
        let out_start = self.out.len();
        self.out.push_str(text);
        self.frames.push(Frame {
            kind,
            saved: self.flags,
            at,
            out_start,
            branches: 1,
            items: 0,
            solid_items: 0,
            last_solid: None,
            last: None,
            branch_start: self.out.len(),
            first_group: self.groups,
        });
    }

    fn open_capture(&mut self, at: usize, name: Option<String>) -> Translation<()> {
        self.groups += 1;
        let group = self.groups;
        self.closed.push(false);
        self.alternated.push(false);
        if let Some(name) = name {
            if let Some(previous) = self.names.get(&name) {
                return Err(format!("redefinition of group name '{name}' as group {group}; was group {previous}"));
            }
            self.names.insert(name, group);
        }
        // Names are resolved here, so the output only has numbered groups.
        self.open_frame(GroupKind::Capture(group), at, "(");
        Ok(())
    }

    pub(super) fn open_group(&mut self, at: usize) -> Translation<()> {
        if !self.eat('?') {
            return self.open_capture(at, None);
        }
        let unexpected_end = || "unexpected end of pattern".to_owned();
        let c = self.bump().ok_or_else(unexpected_end)?;
        match c {
            'P' => {
                if self.eat('<') {
                    let name = self.checked_group_name('>')?;
                    self.open_capture(at, Some(name))
                } else if self.eat('=') {
                    let name = self.checked_group_name(')')?;
                    let group = *self.names.get(&name).ok_or_else(|| format!("unknown group name '{name}'"))?;
                    if !self.closed[group] {
                        return Err(format!("cannot refer to an open group at position {at}"));
                    }
                    self.push_item(Item::Atom, &format!(r"\k<{group}>"));
                    Ok(())
                } else {
                    let c = self.bump().ok_or_else(unexpected_end)?;
                    Err(format!("unknown extension ?P{c} at position {}", at + 1))
                }
            }
            ':' => {
                self.open_frame(GroupKind::Plain, at, "(?:");
                Ok(())
            }
            '#' => loop {
                match self.bump_token() {
                    None => return Err("missing ), unterminated comment".to_owned()),
                    Some(')') => return Ok(()),
                    Some(_) => {}
                }
            },
            '=' => {
                self.open_frame(GroupKind::Lookaround, at, "(?=");
                Ok(())
            }
            '!' => {
                self.open_frame(GroupKind::Lookaround, at, "(?!");
                Ok(())
            }
            '<' => match self.bump() {
                Some('=') => {
                    self.open_frame(GroupKind::Lookaround, at, "(?<=");
                    Ok(())
                }
                Some('!') => {
                    self.open_frame(GroupKind::Lookaround, at, "(?<!");
                    Ok(())
                }
                Some(c) => Err(format!("unknown extension ?<{c} at position {}", at + 1)),
                None => Err(unexpected_end()),
            },
            '(' => self.open_conditional(at),
            '>' => {
                self.open_frame(GroupKind::Atomic, at, "(?>");
                Ok(())
            }
            c if is_flag_char(c) || c == '-' => self.inline_flags(at, c),
            c => Err(format!("unknown extension ?{c} at position {}", at + 1)),
        }
    }

    fn open_conditional(&mut self, at: usize) -> Translation<()> {
        let name = self.group_name(')')?;
        let group = if is_identifier(&name) {
            *self.names.get(&name).ok_or_else(|| format!("unknown group name '{name}'"))?
        } else if name.bytes().all(|b| b.is_ascii_digit()) {
            let group = name.parse::<usize>().map_err(|_| format!("invalid group reference {name}"))?;
            if group == 0 {
                return Err("bad group number".to_owned());
            }
            self.conditional_refs.push((group, at + 3));
            group
        } else {
            return Err(format!("bad character in group name '{name}'"));
        };
        self.conditioned.push(group);
        self.open_frame(GroupKind::Conditional, at, &format!("(?({group})"));
        Ok(())
    }

    /// `(?flags)` or `(?flags-flags:...)`; `first` is the first flag or `-`.
    fn inline_flags(&mut self, at: usize, first: char) -> Translation<()> {
        let mut add = Flags::default();
        let mut remove = Flags::default();
        let mut c = first;
        if c != '-' {
            loop {
                match c {
                    'L' => {
                        return Err("bad inline flags: cannot use 'L' flag with a str pattern".to_owned());
                    }
                    't' => return Err(TEMPLATE_UNSUPPORTED.to_owned()),
                    _ => add.set(c, true),
                }
                if add.ascii && add.unicode {
                    return Err("bad inline flags: flags 'a', 'u' and 'L' are incompatible".to_owned());
                }
                c = self.bump().ok_or_else(|| "missing -, : or )".to_owned())?;
                if ")-:".contains(c) {
                    break;
                }
                if !is_flag_char(c) {
                    return Err(if c.is_alphabetic() {
                        "unknown flag".to_owned()
                    } else {
                        "missing -, : or )".to_owned()
                    });
                }
            }
        }
        if c == ')' {
            let frame = &self.frames[self.frames.len() - 1];
            if self.frames.len() > 1 || frame.branches > 1 || frame.items > 0 {
                return Err(format!("global flags not at the start of the expression at position {at}"));
            }
            // Global flags apply to the whole pattern; `(?i)` is emitted once
            // they are all known, at the end.
            for (flag, on) in [
                ('i', add.ignore_case),
                ('m', add.multiline),
                ('s', add.dotall),
                ('x', add.verbose),
                ('a', add.ascii),
                ('u', add.unicode),
            ] {
                if on {
                    self.flags.set(flag, true);
                }
            }
            return Ok(());
        }
        if c == '-' {
            c = self.bump().ok_or_else(|| "missing flag".to_owned())?;
            if !is_flag_char(c) {
                return Err(if c.is_alphabetic() { "unknown flag".to_owned() } else { "missing flag".to_owned() });
            }
            loop {
                match c {
                    'a' | 'u' | 'L' => {
                        return Err("bad inline flags: cannot turn off flags 'a', 'u' and 'L'".to_owned());
                    }
                    't' => return Err(TEMPLATE_UNSUPPORTED.to_owned()),
                    _ => remove.set(c, true),
                }
                c = self.bump().ok_or_else(|| "missing :".to_owned())?;
                if c == ':' {
                    break;
                }
                if !is_flag_char(c) {
                    return Err(if c.is_alphabetic() { "unknown flag".to_owned() } else { "missing :".to_owned() });
                }
            }
        }
        if add.any_common(remove) {
            return Err("bad inline flags: flag turned on and off".to_owned());
        }
        let mut scoped = self.flags;
        for (flag, on, off) in [
            ('i', add.ignore_case, remove.ignore_case),
            ('m', add.multiline, remove.multiline),
            ('s', add.dotall, remove.dotall),
            ('x', add.verbose, remove.verbose),
            ('a', add.ascii, false),
            ('u', add.unicode, false),
        ] {
            if on {
                scoped.set(flag, true);
            } else if off {
                scoped.set(flag, false);
            }
        }
        if add.ascii {
            scoped.unicode = false;
        }
        if add.unicode {
            scoped.ascii = false;
        }
        let text = match (self.flags.fancy_ignore_case(), scoped.fancy_ignore_case()) {
            (false, true) => "(?i:",
            (true, false) => "(?-i:",
            _ => "(?:",
        };
        self.open_frame(GroupKind::Plain, at, text);
        self.flags = scoped;
        Ok(())
    }

    pub(super) fn close_group(&mut self, at: usize) -> Translation<()> {
        if self.frames.len() == 1 {
            return Err(format!("unbalanced parenthesis at position {at}"));
        }
        if self.frame().kind == GroupKind::Conditional && self.frame().branches == 1 {
            self.guard_conditional_yes_branch();
        }
        let Some(frame) = self.frames.pop() else {
            return Err(format!("unbalanced parenthesis at position {at}"));
        };
        self.out.push(')');
        self.flags = frame.saved;
        if frame.branches > 1 {
            self.mark_alternated(frame.first_group);
        }
        let item = match frame.kind {
            GroupKind::Capture(group) => {
                self.closed[group] = true;
                Item::Atom
            }
            GroupKind::Lookaround => Item::ZeroWidth,
            GroupKind::Plain if frame.branches == 1 && frame.solid_items == 0 => Item::Empty,
            GroupKind::Plain
                if frame.branches == 1
                    && frame.solid_items == 1
                    && matches!(frame.last_solid, Some(Item::ZeroWidth | Item::ZeroWidthRepeat | Item::Anchor)) =>
            {
                Item::ZeroWidth
            }
            GroupKind::Top | GroupKind::Plain | GroupKind::Atomic | GroupKind::Conditional => Item::Atom,
        };
        self.register_item(item, frame.out_start);
        Ok(())
    }
}
