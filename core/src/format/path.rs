//! Field paths: where a node sits in a document, from the root (`targets[0].transport.uid`).
//! Shared by the YAML tree ([`super::yaml`]) and the deserializer ([`super::de`]).

use std::fmt;

/// One step of a [`Path`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index (0-based).
    Index(usize),
}

/// Where a node sits in a document, from the root.
///
/// Displays as `targets[0].transport.uid`; keys made of anything but ASCII letters,
/// digits, `_` and `-` are quoted (`bindings["my key"]`), and the empty path displays as
/// `document root`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(pub Vec<Seg>);

impl Path {
    /// The path of the document root.
    pub fn root() -> Self {
        Path(Vec::new())
    }

    /// Whether this is the document root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// This path followed by the mapping key `key`.
    #[must_use]
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.into()));
        Path(segs)
    }

    /// This path followed by the sequence index `index`.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Path(segs)
    }
}

fn is_bare_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("document root");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) if is_bare_key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                Seg::Key(key) => write!(f, "[{key:?}]")?,
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}
