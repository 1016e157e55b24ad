//! How the command line shows a run's events: a progress display on an interactive
//! terminal (drawn on stderr: trials done of total, running now, outcomes so far, elapsed
//! and ETA; cleared when the run ends, so it never mixes with the summary), warnings as
//! `WARNING: …` lines in every mode (printed above the display, as are log lines), and,
//! with `--events FILE`, every event appended to that file ([`EventsFile`]).
//!
//! When stderr is not a terminal nothing is drawn: the output stays line-based, without
//! escape codes. `--quiet` draws nothing and drops the notes; warnings (their first line) and
//! errors remain. Each distinct warning is printed once per command.

use std::collections::BTreeSet;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use elengtis::error::CommandError as Error;
use elengtis_core::events::{Event, EventSink, Outcome, OutcomeCounts};
use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::events_file::EventsFile;
use crate::output::{errln, outln};

/// The output flags of the commands that run trials (`run`, `prove`, `bench`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Append the command's events (run started, each trial started, its phases, finished
    /// with its outcome, run finished; warnings) to FILE as they happen, one JSON object per
    /// line (docs/events.md); `tail -f FILE` follows the run.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Draw no progress display and print no notes; warnings (their first line) and errors
    /// are still printed on stderr, results on stdout.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// The progress display drawn now, if any: log lines are printed above it.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn active() -> Option<ProgressBar> {
    ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

fn set_active(bar: Option<ProgressBar>) {
    *ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = bar;
}

/// Write `bytes` to stderr, above the progress display if one is drawn.
fn to_stderr(bytes: &[u8]) {
    let write = || {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(bytes);
        let _ = stderr.flush();
    };
    match active() {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// The warnings printed so far by this command: each distinct warning is printed once, however
/// many runs (prove's campaigns, preflight's calibration) or renderers report it.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Print a warning as `WARNING: …` on stderr, the first time it is reported; under `--quiet`
/// its first line only (the what; the lines after it say where to read more).
fn warn(message: &str, quiet: bool) {
    let fresh = WARNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(message.to_owned());
    if !fresh {
        return;
    }
    let shown = if quiet { message.lines().next().unwrap_or_default() } else { message };
    to_stderr(format!("WARNING: {shown}\n").as_bytes());
}

/// The log's writer (`--log`, `ELENGTIS_LOG`): each log line goes to stderr whole, above the
/// progress display if one is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine(Vec::new())
    }
}

/// One log record, written out when dropped.
#[derive(Debug)]
pub struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            to_stderr(&self.0);
        }
    }
}

/// What the display counts.
#[derive(Debug, Default)]
struct Display {
    bar: Option<ProgressBar>,
    /// Trials started and not yet recorded.
    running: usize,
    /// Recorded attempts by outcome.
    outcomes: OutcomeCounts,
}

impl Display {
    /// The text after `done/total`: running now and the outcomes so far (those with a
    /// count), in the summary's words.
    fn message(&self) -> String {
        let mut parts = vec![format!("{} running", self.running)];
        let o = &self.outcomes;
        for (count, outcome) in [
            (o.completed, Outcome::Completed),
            (o.not_completed, Outcome::NotCompleted),
            (o.unknown, Outcome::Unknown),
            (o.incomplete, Outcome::Incomplete),
        ] {
            if count > 0 {
                parts.push(format!("{count} {}", outcome.label()));
            }
        }
        parts.join(" · ")
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(self.message());
        }
    }
}

/// `trial` or `trials`, as the display's total needs.
fn trials_noun(state: &ProgressState, out: &mut dyn std::fmt::Write) {
    let _ = out.write_str(if state.len() == Some(1) { "trial" } else { "trials" });
}

/// The time left, once a trial has finished to estimate it from; `–` until then (an
/// estimate from nothing read `0s`).
fn eta_once_known(state: &ProgressState, out: &mut dyn std::fmt::Write) {
    if state.pos() == 0 {
        let _ = out.write_str("–");
    } else {
        let _ = write!(out, "{}", HumanDuration(state.eta()));
    }
}

/// Renders events on stderr (and into the events file).
#[derive(Debug)]
pub struct Terminal {
    display: Mutex<Display>,
    progress: bool,
    quiet: bool,
    /// Say what a resumed run still has to do when it starts.
    resume_plan: bool,
    file: Option<EventsFile>,
}

/// Whether stderr is an interactive terminal (progress displays are drawn only there).
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
}

impl Terminal {
    /// A renderer; `progress` draws a progress display (interactive terminals only).
    pub fn new(progress: bool) -> Self {
        Terminal { display: Mutex::default(), progress, quiet: false, resume_plan: false, file: None }
    }

    /// The renderer of a command with these output flags: a progress display on an
    /// interactive stderr unless `--quiet` or `json` (one JSON object on stdout), and the
    /// events file `--events` names, opened for appending.
    pub fn for_command(args: &OutputArgs, json: bool) -> Result<Self, Error> {
        let file = args.events.as_deref().map(EventsFile::open).transpose()?;
        Ok(Terminal {
            display: Mutex::default(),
            progress: interactive() && !json && !args.quiet,
            quiet: args.quiet,
            resume_plan: false,
            file,
        })
    }

    /// This renderer, saying when the run starts how many of its trials are complete and how
    /// many it runs now (`run --resume`; a note, dropped by `--quiet`).
    pub fn with_resume_plan(mut self) -> Self {
        self.resume_plan = true;
        self
    }

    /// Whether notes are dropped (`--quiet`).
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    fn with_display<T>(&self, f: impl FnOnce(&mut Display) -> T) -> T {
        let mut display = self.display.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut display)
    }

    /// Print `text` to stdout (its lines as they are), above the progress display if one
    /// is drawn.
    pub fn print(&self, text: &str) {
        self.with_display(|display| match &display.bar {
            Some(bar) => bar.suspend(|| outln!("{text}")),
            None => outln!("{text}"),
        });
    }

    /// Clear the progress display (before the summary is printed), and say if the events
    /// file could not be written.
    pub fn finish(&self) {
        self.with_display(|display| {
            if let Some(bar) = display.bar.take() {
                set_active(None);
                bar.finish_and_clear();
            }
        });
        if let Some(failure) = self.file.as_ref().and_then(EventsFile::failure) {
            errln!("WARNING: {failure}");
        }
    }

    fn start(&self, todo: usize) {
        self.with_display(|display| {
            match &display.bar {
                // Runs at once or in turn (prove's campaigns, bench's measurements) share
                // one display.
                Some(bar) => bar.inc_length(todo as u64),
                None => {
                    let bar = ProgressBar::with_draw_target(Some(todo as u64), ProgressDrawTarget::stderr());
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{spinner} [{elapsed_precise}] {bar:20} {pos}/{len} {trials} · {msg} · ETA {eta_once_known}",
                        )
                        .map(|style| style.with_key("trials", trials_noun).with_key("eta_once_known", eta_once_known))
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    bar.enable_steady_tick(Duration::from_millis(250));
                    set_active(Some(bar.clone()));
                    display.bar = Some(bar);
                }
            }
            display.redraw();
        });
    }
}

impl EventSink for Terminal {
    fn emit(&self, event: &Event) {
        if let Some(file) = &self.file {
            file.emit(event);
        }
        match event {
            Event::Warning { message } => warn(message, self.quiet),
            Event::RunStarted { run_id, total, todo, .. } => {
                if self.resume_plan && !self.quiet {
                    let done = total.saturating_sub(*todo);
                    to_stderr(
                        format!(
                            "resuming run {run_id}: {done} of {total} trial{} complete, {todo} to run\n",
                            if *total == 1 { "" } else { "s" }
                        )
                        .as_bytes(),
                    );
                }
                if self.progress {
                    self.start(*todo);
                }
            }
            Event::TrialStarted { .. } if self.progress => self.with_display(|display| {
                display.running += 1;
                display.redraw();
            }),
            Event::TrialFinished { outcome, .. } if self.progress => self.with_display(|display| {
                display.running = display.running.saturating_sub(1);
                display.outcomes.add(*outcome);
                if let Some(bar) = &display.bar {
                    bar.inc(1);
                }
                display.redraw();
            }),
            Event::TrialStarted { .. }
            | Event::TrialFinished { .. }
            | Event::TrialPhase { .. }
            | Event::RunStopping { .. }
            | Event::TargetStopped { .. }
            | Event::RunFinished { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_display_names_running_trials_and_only_the_outcomes_seen() {
        let mut display = Display::default();
        assert_eq!(display.message(), "0 running");
        display.running = 2;
        display.outcomes.add(Outcome::Completed);
        display.outcomes.add(Outcome::Incomplete);
        display.outcomes.add(Outcome::Incomplete);
        assert_eq!(display.message(), "2 running · 1 completed · 2 incomplete");
    }
}
