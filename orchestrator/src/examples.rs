//! Packaged examples a new user can run and read (`elengtis example`).
//!
//! Each example is a campaign and its scenarios, embedded from `scenarios/examples/` at
//! build time and written next to the results, so what ran can be read and rerun.

use std::path::{Path, PathBuf};

/// One packaged example.
#[derive(Debug)]
pub struct Example {
    /// Name on the command line.
    pub name: &'static str,
    /// One line about it.
    pub description: &'static str,
    /// Files: name and content; the first is the campaign.
    pub files: &'static [(&'static str, &'static str)],
}

/// Every packaged example; the first is the default.
pub const EXAMPLES: &[Example] = &[
    Example {
        name: "support-note",
        description: "a prompt injection in a support note exfiltrates a canary credential (stdio fixture, scripted comply model; no API key, network or Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/support-note/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/support-note/support-note.yaml")),
        ],
    },
    Example {
        name: "refusal",
        description: "the negative control: the same scenario with a scripted model that refuses (proposed 0/1, completed 0/1)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/refusal/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/refusal/support-note.yaml")),
        ],
    },
];

/// Find an example by name.
pub fn find(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}

/// Write the example's files into `dir` and return the campaign's path.
pub fn write(example: &Example, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for (name, content) in example.files {
        std::fs::write(dir.join(name), content)?;
    }
    Ok(dir.join(example.files[0].0))
}
