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
    /// Runs in isolated containers: needs Docker and the bundled images.
    pub isolated: bool,
    /// The name of this example's isolated variant (`--isolated`).
    pub isolated_variant: Option<&'static str>,
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
        isolated: false,
        isolated_variant: Some("support-note-isolated"),
    },
    Example {
        name: "refusal",
        description: "the negative control: the same scenario with a scripted model that refuses (proposed 0/1, completed 0/1)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/refusal/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/refusal/support-note.yaml")),
        ],
        isolated: false,
        isolated_variant: None,
    },
    Example {
        name: "support-note-isolated",
        description: "the support-note example with the fixture in a hardened container per trial, verified at a canary sink (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/support-note-isolated/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/support-note-isolated/support-note.yaml")),
        ],
        isolated: true,
        isolated_variant: None,
    },
    Example {
        name: "sink-exfil",
        description: "an injected note sends the canary to an outside URL; the trial's canary sink records it (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/sink-exfil/campaign.yaml")),
            ("report-exfil.yaml", include_str!("../../scenarios/examples/sink-exfil/report-exfil.yaml")),
        ],
        isolated: true,
        isolated_variant: None,
    },
    Example {
        name: "sqlite-state",
        description: "an injected note makes the agent write the canary into a SQLite database; a snapshot proves it (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/sqlite-state/campaign.yaml")),
            ("notes-exfil.yaml", include_str!("../../scenarios/examples/sqlite-state/notes-exfil.yaml")),
        ],
        isolated: true,
        isolated_variant: None,
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
