//! How diagnostics quote what they found, and what they suggest instead.
//!
//! A diagnostic quotes at most a short excerpt of a value ([`excerpt`]): a document of a few
//! megabytes whose aliases copy one long string into many places must not yield a message
//! many times its size. [`bounded`] is the last guard on a whole message. [`suggest`] finds
//! the known name closest to an unknown one ("did you mean `engine`?").

/// Most characters of a value a diagnostic quotes.
pub const EXCERPT_CHARS: usize = 40;

/// Most bytes of one diagnostic message.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// `text` as a diagnostic quotes it: control characters, quotes and backslashes escaped as
/// in a Rust string literal (so a message stays on one line), and, when it is longer than
/// [`EXCERPT_CHARS`] characters, its first ones, an ellipsis and its length
/// (`AAAA… (7000000 characters)`).
pub fn excerpt(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(EXCERPT_CHARS).flat_map(char::escape_debug).collect();
    if chars.next().is_none() {
        return head;
    }
    format!("{head}… ({} characters)", text.chars().count())
}

/// `message`, cut in the middle when it is longer than [`MAX_MESSAGE_BYTES`] (its start and
/// end kept, how much was cut said).
pub fn bounded(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let head_end = floor_char_boundary(&message, MAX_MESSAGE_BYTES * 3 / 4);
    let tail_start = ceil_char_boundary(&message, message.len() - MAX_MESSAGE_BYTES / 4);
    format!("{} …[{} bytes cut]… {}", &message[..head_end], tail_start - head_end, &message[tail_start..])
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `n` and a noun in the number `n` asks for: `1 tool`, `0 tools`, `3 tools` (the plural adds
/// an `s`, which every noun the output counts takes).
pub fn count(n: impl std::fmt::Display, noun: &str) -> String {
    let n = n.to_string();
    let s = if n == "1" { "" } else { "s" };
    format!("{n} {noun}{s}")
}

/// Longest name [`suggest`] compares (a longer one is no typo of a field name).
const MAX_SUGGEST_CHARS: usize = 64;

/// The candidate closest to `unknown` (ignoring case), if it is close enough to be a typo:
/// at most one edit (an insertion, deletion, substitution or swap of two neighbours) for
/// names up to four characters, two up to eight, three beyond.
pub fn suggest<'a>(unknown: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let unknown: Vec<char> = unknown.to_lowercase().chars().collect();
    if unknown.is_empty() || unknown.len() > MAX_SUGGEST_CHARS {
        return None;
    }
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        let lowered: Vec<char> = candidate.to_lowercase().chars().collect();
        let longest = lowered.len().max(unknown.len());
        let allowed = match longest {
            0..=4 => 1,
            5..=8 => 2,
            _ => 3,
        };
        let distance = edit_distance(&unknown, &lowered);
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// two neighbouring characters each cost one.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = best;
        }
    }
    rows[a.len() * width + b.len()]
}

/// `; did you mean `name`?` for the candidate closest to `unknown`, or nothing.
pub fn did_you_mean<'a>(unknown: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(unknown, candidates).map(|name| format!("; did you mean `{name}`?")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_noun_in_their_number() {
        assert_eq!(count(1, "tool"), "1 tool");
        assert_eq!(count(0_u64, "trial"), "0 trials");
        assert_eq!(count(3_usize, "attempt"), "3 attempts");
    }

    #[test]
    fn short_values_are_quoted_whole_and_long_ones_as_an_excerpt() {
        assert_eq!(excerpt("two"), "two");
        assert_eq!(excerpt("a\nb\"c"), "a\\nb\\\"c");
        let long = "é".repeat(7_000_000);
        let shown = excerpt(&long);
        assert_eq!(shown, format!("{}… (7000000 characters)", "é".repeat(EXCERPT_CHARS)));
        assert_eq!(excerpt(&"x".repeat(EXCERPT_CHARS)), "x".repeat(EXCERPT_CHARS));
    }

    #[test]
    fn messages_are_bounded_at_char_boundaries() {
        let short = "a".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(bounded(short.clone()), short);
        let long = format!("start {} end", "é".repeat(MAX_MESSAGE_BYTES));
        let cut = bounded(long);
        assert!(cut.len() < MAX_MESSAGE_BYTES + 64, "{}", cut.len());
        assert!(cut.starts_with("start ") && cut.ends_with(" end") && cut.contains("bytes cut]"), "{cut}");
    }

    #[test]
    fn suggestions_are_near_misses_only() {
        let fields = ["schema_version", "trials", "step_budget", "engine", "model", "targets"];
        assert_eq!(suggest("engnie", fields), Some("engine"));
        assert_eq!(suggest("Engine", fields), Some("engine"));
        assert_eq!(suggest("trails", fields), Some("trials"));
        assert_eq!(suggest("stepbudget", fields), Some("step_budget"));
        assert_eq!(suggest("modle", fields), Some("model"));
        assert_eq!(suggest("zzzzzz", fields), None);
        assert_eq!(suggest("x", fields), None);
        assert_eq!(suggest(&"e".repeat(1000), fields), None);
        assert_eq!(suggest("canry", ["canary", "collector", "trial_dir"]), Some("canary"));
        assert_eq!(did_you_mean("stdoi", ["stdio", "streamable_http"]), "; did you mean `stdio`?");
        assert_eq!(did_you_mean("nothing", ["stdio"]), "");
    }
}
