//! How the command line shows a run's events: a progress display on an interactive
//! terminal (drawn on stderr, cleared when the run ends, so it never mixes with the
//! summary), and warnings as `WARNING: …` lines in every mode.

use std::sync::Mutex;

use elengtis_core::events::{Event, EventSink};

/// Renders events on stderr.
#[derive(Debug)]
pub struct Terminal {
    bar: Mutex<Option<indicatif::ProgressBar>>,
    progress: bool,
}

impl Terminal {
    /// A renderer; `progress` draws a progress display (interactive terminals only).
    pub fn new(progress: bool) -> Self {
        Terminal { bar: Mutex::new(None), progress }
    }

    fn with_bar(&self, f: impl FnOnce(&mut Option<indicatif::ProgressBar>)) {
        let mut bar = self.bar.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut bar);
    }

    /// Print `text` to stdout (its lines as they are), above the progress display if one
    /// is drawn.
    pub fn print(&self, text: &str) {
        self.with_bar(|bar| match bar {
            Some(bar) => bar.suspend(|| println!("{text}")),
            None => println!("{text}"),
        });
    }

    /// Clear the progress display (before the summary is printed).
    pub fn finish(&self) {
        self.with_bar(|bar| {
            if let Some(bar) = bar.take() {
                bar.finish_and_clear();
            }
        });
    }
}

impl EventSink for Terminal {
    fn emit(&self, event: &Event) {
        match event {
            Event::Warning { message } => {
                let line = format!("WARNING: {message}");
                self.with_bar(|bar| match bar {
                    Some(bar) => bar.suspend(|| eprintln!("{line}")),
                    None => eprintln!("{line}"),
                });
            }
            Event::RunStarted { todo, .. } if self.progress => self.with_bar(|bar| match bar {
                // Runs at once (prove's campaigns) share one display.
                Some(bar) => bar.inc_length(*todo as u64),
                None => {
                    let new = indicatif::ProgressBar::new(*todo as u64);
                    new.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    *bar = Some(new);
                }
            }),
            Event::TrialStarted { trial_id, .. } => self.with_bar(|bar| {
                if let Some(bar) = bar {
                    bar.set_message(trial_id.clone());
                }
            }),
            Event::TrialFinished { .. } => self.with_bar(|bar| {
                if let Some(bar) = bar {
                    bar.inc(1);
                }
            }),
            Event::RunStarted { .. } | Event::RunStopping { .. } => {}
        }
    }
}
