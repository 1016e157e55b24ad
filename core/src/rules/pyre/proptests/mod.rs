//! Property tests of the translator.
//!
//! * Literal patterns: a pattern written with [`py_escape`] (Python's
//!   `re.escape`) matches exactly the subjects that contain the text, and
//!   `\A...\Z`, `^...$` and `(?i)` around it mean what they mean in Python.
//! * Robustness: any string either compiles or is a [`PatternError`] with a
//!   message; a compiled pattern searches without panicking.
//! * Supported constructs: every pattern of the generated grammar
//!   ([`grammar`]) compiles, and (in [`cpython`]) its searches agree with
//!   CPython's `re.search` on generated subjects.
//!
//! Case counts keep this module to a few seconds in a debug build; set
//! `PROPTEST_CASES` to run more (the differential test then runs that many
//! batches).

mod cpython;
mod grammar;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config;

use self::grammar::{any_char, py_escape};
use super::{PatternError, compile_pattern};

/// `PROPTEST_CASES` if set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(default_cases: u32) -> Config {
    Config { cases: cases(default_cases), failure_persistence: None, ..Config::default() }
}

fn search(pattern: &str, subject: &str) -> bool {
    let compiled = compile_pattern(pattern).unwrap_or_else(|e| panic!("{pattern:?} should compile: {e}"));
    compiled.search(subject).unwrap_or_else(|e| panic!("{pattern:?} on {subject:?}: {e}"))
}

/// Any text, weighted towards characters that are special in patterns.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        vec(any_char(), 0..8).prop_map(|chars| chars.into_iter().collect()),
        proptest::string::string_regex("(?s).{0,8}").expect("valid regex"),
    ]
}

/// `(needle, subject)`, where the subject contains the needle half of the time.
fn needle_and_subject() -> impl Strategy<Value = (String, String)> {
    (text(), text(), text(), any::<bool>()).prop_map(|(needle, before, after, embed)| {
        let subject = if embed { format!("{before}{needle}{after}") } else { format!("{before}{after}") };
        (needle, subject)
    })
}

/// Strings made of pattern syntax, which reach deep into the translator.
fn pattern_soup() -> impl Strategy<Value = String> {
    const TOKENS: &[&str] = &[
        "(", ")", "(?", "(?:", "(?P<", "(?P=", ">", "(?(", "(?=", "(?!", "(?<=", "(?<!", "(?>", "(?#", "[", "]", "[^",
        "{", "}", ",", "*", "+", "?", "|", "^", "$", ".", "-", "\\", "\\1", "\\0", "\\x", "\\u", "\\U", "\\N", "\\b",
        "\\B", "\\A", "\\Z", "\\d", "\\w", "\\s", "\\W", "a", "b", "n", "1", "2", "7", "9", "0", "i", "m", "s", "x",
        "a", "u", "L", "t", "-", ":", "=", "!", "#", " ", "\n", "é", "İ", "\u{d7ff}",
    ];
    vec(proptest::sample::select(TOKENS), 0..16).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config(256))]

    /// An escaped literal matches exactly the subjects that contain it.
    #[test]
    fn escaped_literal_matches_where_contained((needle, subject) in needle_and_subject()) {
        let pattern = py_escape(&needle);
        prop_assert_eq!(search(&pattern, &subject), subject.contains(&needle), "pattern {:?}", pattern);
    }

    /// `\A` and `\Z` around a literal: the whole subject; `^` and `$`: the
    /// whole subject, or the subject but a final newline.
    #[test]
    fn anchored_literal_matches_the_whole_subject((needle, subject) in needle_and_subject()) {
        let escaped = py_escape(&needle);
        prop_assert_eq!(search(&format!(r"\A{escaped}\Z"), &subject), subject == needle);
        let with_newline = format!("{needle}\n");
        let dollar = format!("^{escaped}$");
        prop_assert_eq!(search(&dollar, &subject), subject == needle || subject == with_newline);
        prop_assert!(search(&dollar, &with_newline));
    }

    /// Under `(?i)`, an ASCII literal matches ASCII subjects that contain it
    /// in any case.
    #[test]
    fn case_insensitive_ascii_literal(
        needle in "[ -~]{0,6}",
        before in "[ -~]{0,6}",
        after in "[ -~]{0,6}",
        embed in any::<bool>(),
        flip in any::<bool>(),
    ) {
        let mut subject = if embed { format!("{before}{needle}{after}") } else { format!("{before}{after}") };
        if flip {
            subject = subject.chars().map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() }).collect();
        }
        let expected = subject.to_ascii_lowercase().contains(&needle.to_ascii_lowercase());
        prop_assert_eq!(search(&format!("(?i){}", py_escape(&needle)), &subject), expected);
        prop_assert_eq!(search(&format!("(?ai){}", py_escape(&needle)), &subject), expected);
    }

    /// Any string compiles, or is rejected with a message; nothing panics.
    #[test]
    fn translation_never_panics(pattern in prop_oneof![pattern_soup(), any::<String>()], subject in text()) {
        check_compiles_or_rejects(&pattern, &subject)?;
    }

    /// Every pattern of the grammar of supported constructs compiles, and
    /// searches without the engine giving up.
    #[test]
    fn supported_constructs_compile(case in grammar::case(2)) {
        let compiled = compile_pattern(&case.pattern);
        prop_assert!(compiled.is_ok(), "{:?}: {}", case.pattern, compiled.err().map(|e| e.to_string()).unwrap_or_default());
        if let Ok(compiled) = compiled {
            for subject in &case.subjects {
                let found = compiled.search(subject);
                prop_assert!(found.is_ok(), "{:?} on {:?}: {:?}", case.pattern, subject, found);
            }
        }
    }
}

fn check_compiles_or_rejects(pattern: &str, subject: &str) -> Result<(), TestCaseError> {
    match compile_pattern(pattern) {
        Ok(compiled) => {
            prop_assert_eq!(compiled.as_str(), pattern);
            // Runtime errors (backtracking budget) are allowed; panics are not.
            let _ = compiled.search(subject);
        }
        Err(error) => check_error(&error, pattern)?,
    }
    Ok(())
}

fn check_error(error: &PatternError, pattern: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(error.pattern(), pattern);
    prop_assert!(!error.message().trim().is_empty(), "empty message for {:?}", pattern);
    let text = error.to_string();
    prop_assert!(text.starts_with("invalid regular expression"), "{}", text);
    prop_assert!(!text.ends_with('.'), "{}", text);
    Ok(())
}
