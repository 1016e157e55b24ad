//! Packaged examples a new user can run and read (`elengtis example`).
//!
//! Each example is a campaign and its scenarios, embedded from `scenarios/examples/` at
//! build time and written next to the results, so what ran can be read and rerun. An example
//! with a model script (`live-local`) also starts the scripted model server
//! ([`ScriptedModelServer`]) and points its campaign at it, so the real HTTP provider path
//! runs with no key and no network.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt as _;

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
    /// The model script (one of `files`) of the scripted model server this example starts;
    /// its address replaces [`MODEL_SERVER_PLACEHOLDER`] in the campaign.
    pub model_server: Option<&'static str>,
    /// Its negative control (`--control`), or why it has none.
    pub control: Control,
}

/// An example's negative control: the same target, scenario and checks, with a model that
/// does not carry out the attack, so the checks run and read `completed: false` because the
/// effect is absent — not because something failed (docs/verifiers.md, "Controls that read
/// false").
#[derive(Debug)]
pub enum Control {
    /// A campaign among the example's files.
    Campaign {
        /// The control's campaign (one of `files`).
        campaign: &'static str,
        /// The model script its scripted model server runs (one of `files`).
        model_server: Option<&'static str>,
    },
    /// The example has no control of its own, for this reason.
    None(&'static str),
}

/// The text in an example campaign that the model server's address replaces.
pub const MODEL_SERVER_PLACEHOLDER: &str = "MODEL-SERVER";

/// Every packaged example; the first is the default.
pub const EXAMPLES: &[Example] = &[
    Example {
        name: "support-note",
        description: "a prompt injection in a support note exfiltrates a canary credential (stdio fixture, scripted comply model; no API key, network or Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/support-note/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/support-note/support-note.yaml")),
            // The control is the refusal example's campaign (the same scenario file).
            ("campaign-control.yaml", include_str!("../../scenarios/examples/refusal/campaign.yaml")),
        ],
        isolated: false,
        isolated_variant: Some("support-note-isolated"),
        model_server: None,
        control: Control::Campaign { campaign: "campaign-control.yaml", model_server: None },
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
        model_server: None,
        control: Control::None(
            "it is the negative control of support-note (`elengtis example support-note --control` runs it); its counterpart where the effect happens is support-note itself",
        ),
    },
    Example {
        name: "support-note-isolated",
        description: "the support-note example with the fixture in a hardened container per trial, verified at a canary sink (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/support-note-isolated/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/support-note-isolated/support-note.yaml")),
            (
                "campaign-control.yaml",
                include_str!("../../scenarios/examples/support-note-isolated/campaign-control.yaml"),
            ),
        ],
        isolated: true,
        isolated_variant: None,
        model_server: None,
        control: Control::Campaign { campaign: "campaign-control.yaml", model_server: None },
    },
    Example {
        name: "sink-exfil",
        description: "an injected note sends the canary to an outside URL; the trial's canary sink records it (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/sink-exfil/campaign.yaml")),
            ("report-exfil.yaml", include_str!("../../scenarios/examples/sink-exfil/report-exfil.yaml")),
            ("campaign-control.yaml", include_str!("../../scenarios/examples/sink-exfil/campaign-control.yaml")),
        ],
        isolated: true,
        isolated_variant: None,
        model_server: None,
        control: Control::Campaign { campaign: "campaign-control.yaml", model_server: None },
    },
    Example {
        name: "sqlite-state",
        description: "an injected note makes the agent write the canary into a SQLite database; a snapshot proves it (Docker)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/sqlite-state/campaign.yaml")),
            ("notes-exfil.yaml", include_str!("../../scenarios/examples/sqlite-state/notes-exfil.yaml")),
            ("campaign-control.yaml", include_str!("../../scenarios/examples/sqlite-state/campaign-control.yaml")),
        ],
        isolated: true,
        isolated_variant: None,
        model_server: None,
        control: Control::Campaign { campaign: "campaign-control.yaml", model_server: None },
    },
    Example {
        name: "live-local",
        description: "the support-note example through the real OpenAI-compatible HTTP provider path, against the scripted model server on 127.0.0.1 (no API key or network)",
        files: &[
            ("campaign.yaml", include_str!("../../scenarios/examples/live-local/campaign.yaml")),
            ("support-note.yaml", include_str!("../../scenarios/examples/live-local/support-note.yaml")),
            ("model-script.json", include_str!("../../scenarios/examples/live-local/model-script.json")),
            ("campaign-control.yaml", include_str!("../../scenarios/examples/live-local/campaign-control.yaml")),
            (
                "model-script-control.json",
                include_str!("../../scenarios/examples/live-local/model-script-control.json"),
            ),
        ],
        isolated: false,
        isolated_variant: None,
        model_server: Some("model-script.json"),
        control: Control::Campaign {
            campaign: "campaign-control.yaml",
            model_server: Some("model-script-control.json"),
        },
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

impl Example {
    /// The campaign file and model script to run: the example's own, or with `control` its
    /// negative control's (an error saying why when it has none).
    pub fn selected(&self, control: bool) -> Result<(&'static str, Option<&'static str>), String> {
        match (&self.control, control) {
            (_, false) => Ok((self.files[0].0, self.model_server)),
            (Control::Campaign { campaign, model_server }, true) => Ok((campaign, *model_server)),
            (Control::None(why), true) => Err(format!("example `{}` has no negative control: {why}", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_names_a_control_among_its_files_or_says_why_not() {
        for example in EXAMPLES {
            let names: Vec<&str> = example.files.iter().map(|(n, _)| *n).collect();
            match &example.control {
                Control::Campaign { campaign, model_server } => {
                    assert!(names.contains(campaign), "{}: {campaign} is not among {names:?}", example.name);
                    assert_eq!(model_server.is_some(), example.model_server.is_some(), "{}", example.name);
                    assert!(model_server.is_none_or(|m| names.contains(&m)), "{}", example.name);
                    assert_ne!(*campaign, example.files[0].0, "{}: the control is another campaign", example.name);
                }
                Control::None(why) => assert!(!why.is_empty(), "{}", example.name),
            }
        }
    }
}

/// How long the model server may take to say where it listens.
const SERVER_READY: Duration = Duration::from_secs(10);

/// The scripted model server (`elengtis-model-server`) as a child process on 127.0.0.1: killed
/// when dropped, and it also stops when its stdin closes (the runner exiting).
#[derive(Debug)]
pub struct ScriptedModelServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _child: tokio::process::Child,
}

impl ScriptedModelServer {
    /// Start the server on `script`; found beside the elengtis executable, else in `PATH`.
    pub async fn start(script: &Path) -> Result<Self, String> {
        let program = server_program()?;
        let mut child = tokio::process::Command::new(&program)
            .arg("--script")
            .arg(script)
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("failed to start {}: {e}", program.display()))?;
        let stdout = child.stdout.take().ok_or("failed to read the model server's output")?;
        let mut line = String::new();
        let mut reader = tokio::io::BufReader::new(stdout);
        match tokio::time::timeout(SERVER_READY, reader.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) => return Err("failed to start the model server: it exited before it was ready".into()),
            Err(_) => {
                return Err(format!("failed to start the model server: not ready within {} s", SERVER_READY.as_secs()));
            }
        }
        let ready: serde_json::Value = serde_json::from_str(line.trim())
            .map_err(|e| format!("failed to read the model server's ready line `{}`: {e}", line.trim()))?;
        let addr = ready["listening"]
            .as_str()
            .ok_or_else(|| format!("failed to read the model server's address from `{}`", line.trim()))?
            .to_owned();
        Ok(ScriptedModelServer { addr, _child: child })
    }
}

fn server_program() -> Result<PathBuf, String> {
    const NAME: &str = "elengtis-model-server";
    let beside = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join(NAME)));
    let in_path = std::env::var_os("PATH").into_iter().flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    beside
        .into_iter()
        .chain(in_path.map(|d| d.join(NAME)))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("failed to find {NAME} beside the elengtis executable or in PATH; build it with `cargo build -p elengtis-model-server`"))
}
