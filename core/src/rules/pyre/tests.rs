//! The translator's unit tests: `re.search` results and error messages,
//! with the expected values produced by CPython.

use super::*;
use serde_json::json;

fn search(pattern: &str, subject: &str) -> bool {
    let compiled = compile_pattern(pattern).unwrap_or_else(|e| panic!("{pattern:?} should compile: {e}"));
    compiled.search(subject).unwrap_or_else(|e| panic!("{pattern:?} on {subject:?}: {e}"))
}

/// `(pattern, subject, re.search(pattern, subject) is not None)`, with the
/// expected values produced by CPython.
const SEARCH_CASES: &[(&str, &str, bool)] = &[
    // unanchored search
    ("b", "abc", true),
    ("d", "abc", false),
    ("", "", true),
    ("ELENGTIS-[0-9a-f-]+", "token ELENGTIS-1234-abcd here", true),
    // anchors
    ("^abc", "abc", true),
    ("^b", "abc", false),
    ("c$", "abc", true),
    ("c$", "abc\n", true),
    ("c$", "abc\n\n", false),
    ("c$", "abc\nx", false),
    ("^$", "", true),
    ("^$", "\n", true),
    ("a$\n", "a\n", true),
    (r"c\Z", "abc", true),
    (r"c\Z", "abc\n", false),
    (r"\Aab", "ab", true),
    (r"\Ab", "ab", false),
    ("(?m)^b$", "a\nb\nc", true),
    ("^b$", "a\nb\nc", false),
    ("(?m)a$", "a\nb", true),
    ("(?m)^$", "a\n", true),
    ("(?m:^b)", "a\nb", true),
    ("x(?m:^b)", "a\nb", false),
    // dot and dotall
    ("a.c", "a\nc", false),
    ("(?s)a.c", "a\nc", true),
    ("(?s:a.c)", "a\nc", true),
    ("a.c", "a\u{e9}c", true),
    // case
    ("(?i)HELLO", "say hello", true),
    ("(?i:h)ELLO", "hELLO", true),
    ("(?i:h)ELLO", "hello", false),
    ("(?i)(?-i:a)b", "aB", true),
    ("(?i)(?-i:a)b", "AB", false),
    ("(?i)[a-c]+$", "ABC", true),
    ("(?i)\u{e9}", "\u{c9}", true),
    // groups, backreferences, conditionals
    (r"(a)\1", "aa", true),
    (r"(a)\1", "ab", false),
    (r"(?P<n>ab)(?P=n)", "abab", true),
    (r"(?P<n>ab)(?P=n)", "abba", false),
    (r"(?P<word>\w+) (?P=word)", "hello hello", true),
    (r"(?i)(a)\1", "aA", true),
    (r"(a)?b\1", "b", false),
    (r"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)\11", "abcdefghijkk", true),
    (r"(a)\100", "a@", true),
    (r"(a)?(?(1)b|c)$", "ab", true),
    (r"^(a)?(?(1)b|c)$", "c", true),
    (r"^(a)?(?(1)b|c)$", "ac", false),
    (r"^(?P<q>')?x(?(q)')$", "'x'", true),
    (r"^(?P<q>')?x(?(q)')$", "'x", false),
    (r"^(?:(?(1)b|a)(x)?)+$", "axb", true),
    // lookaround
    ("foo(?=bar)", "foobar", true),
    ("foo(?=bar)", "foobaz", false),
    ("foo(?!bar)", "foobar", false),
    ("(?<=a)b", "ab", true),
    ("(?<!a)b", "ab", false),
    ("(?=a)*b", "b", true),
    ("(?:(?=a))+a", "a", true),
    ("(?=x)?y", "y", true),
    ("(?:)*a", "a", true),
    ("(?:$)?a", "a", true),
    // atomic and possessive
    ("(?>a*)a", "aaa", false),
    ("a*+a", "aaa", false),
    ("a++b", "aab", true),
    ("a{1,3}+a", "aaa", false),
    ("a?+a", "a", false),
    // quantifiers and literal braces
    ("a{2}", "aa", true),
    ("a{3}", "aa", false),
    ("^a{,2}$", "aa", true),
    ("^a{,2}$", "aaa", false),
    ("^a{2,}$", "aaa", true),
    ("^a{,}$", "aaaa", true),
    ("a{", "a{", true),
    ("a{}", "a{}", true),
    ("a{1", "a{1", true),
    ("a{x}", "a{x}", true),
    ("a{1,2", "a{1,2", true),
    ("x}", "x}", true),
    ("x]", "x]", true),
    ("^a*?$", "aaa", true),
    ("^a??b", "b", true),
    // classes
    ("[]a]+$", "]a", true),
    ("[^]a]", "]a", false),
    ("[a-]$", "-", true),
    ("[-a]", "-", true),
    ("[[]", "[", true),
    ("[a&&b]", "&", true),
    ("[+--]", ",", true),
    ("[a-a-]", "-", true),
    ("[a~~b]", "~", true),
    ("[a||b]", "|", true),
    (r"[\]]", "]", true),
    (r"[\d]", "5", true),
    (r"[\D]", "5", false),
    (r"[^\W]", "_", true),
    (r"[\w-]+$", "a-b_c", true),
    (r"[a\-z]", "-", true),
    (r"[\b]", "\u{8}", true),
    (r"[\x41-\x43]+$", "ABC", true),
    (r"[\u00e9]", "\u{e9}", true),
    (r"[\101]", "A", true),
    (r"[.]", "a", false),
    (r"[$^]", "^", true),
    // escapes
    (r"\d+", "abc 123", true),
    (r"\d", "\u{663}", true),
    (r"(?a)\d", "\u{663}", false),
    (r"\w", "\u{e9}", true),
    (r"\w", "\u{b2}", true),
    (r"\w", "\u{301}", false),
    (r"(?a)\w", "\u{e9}", false),
    (r"\s", "\u{1c}", true),
    (r"\s", "\u{a0}", true),
    (r"(?a)\s", "\u{a0}", false),
    (r"\S", " ", false),
    (r"\bfoo\b", "a foo b", true),
    (r"\bfoo\b", "afoob", false),
    (r"\B", "", false),
    (r"\Boo\B", "foob", true),
    (r"\b", "", false),
    (r"\x41", "A", true),
    (r"\u0041", "A", true),
    (r"\U0001F600", "\u{1F600}", true),
    (r"\0", "\0", true),
    (r"\012", "\n", true),
    (r"\101", "A", true),
    (r"\t\n\r\f\v\a", "\t\n\r\u{c}\u{b}\u{7}", true),
    (r"\.", ".", true),
    (r"\.", "a", false),
    (r"\-", "-", true),
    (r"\#", "#", true),
    ("\\\u{e9}", "\u{e9}", true),
    (r"\\", "\\", true),
    // verbose mode
    ("(?x) a b # comment\n c", "abc", true),
    ("(?x) a \\  b", "a b", true),
    ("(?x) a [ ] b", "a b", true),
    ("(?x)a *", "aaa", true),
    ("(?x:a b)c d", "abc d", true),
    ("(?x)a{1, 2}", "a{1,2}", true),
    // comments
    ("a(?#comment)b", "ab", true),
    ("a(?#c)*", "aaa", true),
    // case folding: CPython's Turkish i class, and ASCII-only under (?a)
    ("(?i)i", "\u{130}", true),
    ("(?i)I", "\u{131}", true),
    ("(?i)\u{131}", "i", true),
    ("(?i)[a-z]", "\u{130}", true),
    ("(?i)[^a-z]", "\u{131}", false),
    ("(?i)[\u{100}-\u{140}]", "I", true),
    ("i", "\u{130}", false),
    ("(?i)k", "\u{212a}", true),
    ("(?ai)k", "\u{212a}", false),
    ("(?ai)K", "k", true),
    ("(?ai)[X-c]", "x", true),
    ("(?ai)[^a-z]", "Q", false),
    ("(?ai)\u{e9}", "\u{c9}", false),
    ("(?a)(?i:s)", "\u{17f}", false),
    ("(?i)(?a:K)k", "kK", true),
    (r"(?i)\w", "\u{212a}", true),
    (r"(?i)\W", "\u{212a}", false),
    // possessive repeats are atomic per iteration in CPython
    ("(?:\u{e9}|^){2,}+a", "\u{e9}a", false),
    ("(?:\u{e9}|^){2,}a", "\u{e9}a", true),
    ("(?>(?:\u{e9}|^){2,})a", "\u{e9}a", true),
    ("(?:a|ab)++c", "abc", false),
    ("(?:ab|a)++c", "abc", true),
    // conditionals with empty branches always match the empty string
    (r"(a)|(?(1)|)_", "_", true),
    (r"(a)?(?(1))_", "_", true),
    (r"((?(1)|))b", "b", true),
    (r"(a)?(?(1)|x)_", "_", false),
    // quantified empty and zero-width groups
    ("(?:(?:)(?<!b)){0}x", "x", true),
    ("(?:(?<!b){2,}){0,1}?x", "x", true),
    ("(?:(?:){2}(?!a)){,2}b", "b", true),
    ("(?:(?=)(?i:)){1,2}a", "a", true),
    // comments: an escaped ')' or newline does not end them
    (r"a(?#x\)b)c", "ac", true),
    ("(?x)a#x\\\nb\nc", "ac", true),
    // surrogate escapes never match any Rust string
    (r"\ud800", "x", false),
    (r"x|\ud800", "x", true),
    (r"[\ud800]", "x", false),
    (r"[^\ud800]", "x", true),
    (r"[\ud800x]", "x", true),
    (r"[\ud000-\ue000]", "\u{d7ff}", true),
];

#[test]
fn search_table() {
    for (pattern, subject, expected) in SEARCH_CASES {
        assert_eq!(
            search(pattern, subject),
            *expected,
            "re.search({pattern:?}, {subject:?}) translated as {:?}",
            compile_pattern(pattern).unwrap().translated()
        );
    }
}

/// Patterns that CPython rejects, with (part of) CPython's message.
const INVALID_PATTERNS: &[(&str, &str)] = &[
    ("*", "nothing to repeat at position 0"),
    ("a|*", "nothing to repeat"),
    ("(*)", "nothing to repeat"),
    ("^*", "nothing to repeat"),
    (r"\b+", "nothing to repeat"),
    ("(?i)*", "nothing to repeat"),
    ("a**", "multiple repeat"),
    ("a{2}{3}", "multiple repeat"),
    ("a*?*", "multiple repeat"),
    ("a{3,2}", "min repeat greater than max repeat"),
    ("a{4294967295}", "the repetition number is too large"),
    ("(", "missing ), unterminated subpattern"),
    ("(a(b)", "missing ), unterminated subpattern"),
    (")", "unbalanced parenthesis"),
    ("a)b", "unbalanced parenthesis"),
    ("[a", "unterminated character set"),
    ("[]", "unterminated character set"),
    ("[z-a]", "bad character range z-a"),
    (r"[\d-z]", r"bad character range \d-z"),
    (r"\e", r"bad escape \e"),
    (r"\z", r"bad escape \z"),
    (r"\p{L}", r"bad escape \p"),
    (r"[\A]", r"bad escape \A"),
    (r"[\8]", r"bad escape \8"),
    ("\\", "bad escape (end of pattern)"),
    (r"\x4", r"incomplete escape \x4"),
    (r"\u12", r"incomplete escape \u12"),
    (r"\U00110000", r"bad escape \U00110000"),
    (r"\N{EM DASH}", "named unicode escapes"),
    (r"\1", "invalid group reference 1"),
    (r"(a)\2", "invalid group reference 2"),
    (r"(a\1)", "cannot refer to an open group"),
    (r"\477", "octal escape value"),
    ("(?P<1>a)", "bad character in group name '1'"),
    ("(?P<>a)", "missing group name"),
    ("(?P<a", "missing >, unterminated name"),
    ("(?P<n>a)(?P<n>b)", "redefinition of group name 'n'"),
    ("(?P=n)", "unknown group name 'n'"),
    ("(?P<n>(?P=n))", "cannot refer to an open group"),
    ("(?Px)", "unknown extension ?Px"),
    ("(?<n>a)", "unknown extension ?<n"),
    ("(?z)", "unknown extension ?z"),
    ("(?", "unexpected end of pattern"),
    ("(?#abc", "missing ), unterminated comment"),
    ("a(?i)", "global flags not at the start"),
    ("(a(?i))", "global flags not at the start"),
    ("a|(?i)b", "global flags not at the start"),
    ("(?L)a", "cannot use 'L' flag with a str pattern"),
    ("(?au)a", "incompatible"),
    ("(?-a:a)", "cannot turn off flags"),
    ("(?i-i:a)", "flag turned on and off"),
    ("(?-i)a", "missing :"),
    ("(?i", "missing -, : or )"),
    ("(?iq)", "unknown flag"),
    ("(?(1)a|b|c)(x)", "conditional backref with more than two branches"),
    ("(?(2)a)(x)", "invalid group reference 2"),
    ("(?(0)a)", "bad group number"),
    ("(?(n)a)", "unknown group name 'n'"),
    ("(?(1a)a)", "bad character in group name '1a'"),
    ("(?#a\\)", "missing ), unterminated comment"),
    ("(?x)a#\\", "bad escape (end of pattern)"),
    ("[a\\", "bad escape (end of pattern)"),
    ("(?t)a", "template flag"),
];

#[test]
fn invalid_patterns_are_rejected_with_python_messages() {
    for (pattern, message) in INVALID_PATTERNS {
        let error = compile_pattern(pattern).err().unwrap_or_else(|| panic!("{pattern:?} should be rejected"));
        assert!(error.message().contains(message), "{pattern:?}: got {:?}, expected {message:?}", error.message());
        assert_eq!(error.pattern(), *pattern);
        let text = error.to_string();
        assert!(text.starts_with("invalid regular expression"), "{text}");
        assert!(!text.ends_with('.'), "{text}");
    }
}

#[test]
fn global_flags_may_stack_at_the_start() {
    assert!(search("(?i)(?s)A.B", "a\nb"));
    assert!(search("(?#c)(?i)A", "a"));
    assert!(search("(?x) (?i) A", "a"));
}

#[test]
fn translation_maps_python_only_syntax() {
    let translated = |p: &str| compile_pattern(p).unwrap().translated().to_owned();
    assert_eq!(translated(r"a\Z"), r"a\z");
    assert_eq!(translated("a$"), r"a(?=\n?\z)");
    assert_eq!(translated("(?m)a$"), "a(?m:$)");
    assert_eq!(translated("^a"), r"\Aa");
    assert_eq!(translated("(?P<n>a)(?P=n)"), r"(a)\k<1>");
    assert_eq!(translated("(?P<n>a)(?(n)b)"), "(a)(?(1)b)");
    assert_eq!(translated("a{,3}"), "a{0,3}");
    assert_eq!(translated("a.b"), "a.b");
    assert_eq!(translated("(?s)a.b"), "a(?s:.)b");
    assert_eq!(translated("[]a-]"), r"[\x{5D}a\x{2D}]");
    assert_eq!(translated("(?i)a"), "(?i)a");
}

#[test]
fn catastrophic_patterns_do_not_hang() {
    let subject = format!("{}b", "a".repeat(40));
    let start = std::time::Instant::now();
    // The classic exponential case: CPython takes minutes here.
    assert!(!search("(a+)+$", &subject));
    assert!(!search("(a|aa)+$", &subject));
    assert!(!search("^(a|a)*c", &subject));
    // One that defeats fancy-regex's optimizations: the backtracking
    // budget is exhausted and reported instead of running on.
    let pattern = compile_pattern("(x+x+)+y(?<=y)").unwrap();
    let error = pattern.search(&"x".repeat(40)).unwrap_err();
    assert!(matches!(error, SearchError::Runtime(_)), "{error}");
    assert!(error.to_string().contains("backtracking"), "{error}");
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn python_search_requires_a_string() {
    let pattern = compile_pattern("1").unwrap();
    assert_eq!(python_search(&json!("a1"), &pattern), Ok(true));
    assert_eq!(python_search(&json!("a2"), &pattern), Ok(false));
    for (value, name) in [
        (json!(1), "int"),
        (json!(1.0), "float"),
        (json!(true), "bool"),
        (Value::Null, "NoneType"),
        (json!(["1"]), "list"),
        (json!({"1": 1}), "dict"),
    ] {
        let error = python_search(&value, &pattern).unwrap_err();
        assert_eq!(error.to_string(), format!("expected string or bytes-like object, got '{name}'"));
        assert!(matches!(error, SearchError::Type(_)));
    }
}

#[test]
fn compiled_patterns_compare_by_source() {
    let a = compile_pattern("a+").unwrap();
    assert_eq!(a, compile_pattern("a+").unwrap());
    assert_ne!(a, compile_pattern("a*").unwrap());
    assert_eq!(a.as_str(), "a+");
    assert!(format!("{a:?}").contains("a+"));
}

/// Regressions found by the differential property test against CPython
/// (`proptests::cpython`): `(pattern, subject, re.search(pattern, subject) is
/// not None)`, with the expected values produced by CPython.
const REGRESSION_CASES: &[(&str, &str, bool)] = &[
    // A conditional on a group in an alternation: `fancy-regex` committed to
    // the first alternative that matched and never tried the one that sets
    // the group.
    ("(?:x|(x))(?(1)a|b)", "xa", true),
    ("(?:x|(x))(?(1)a|b)", "xb", true),
    ("(?:x|(x))(?(1)a|b)", "xx", false),
    ("(?:(x)|x)(?(1)a|b)", "xb", true),
    ("(?:(?:.)|(.))((?(1)a|b))", "9iaA\u{a0}", true),
    ("(?P<n>(?:(x)|x))(?(2)a|b)", "xb", true),
    ("^(?:(?(1)a|b)(?:x|(x))){2}$", "bxax", true),
];

#[test]
fn regressions_found_against_cpython() {
    for (pattern, subject, expected) in REGRESSION_CASES {
        assert_eq!(
            search(pattern, subject),
            *expected,
            "re.search({pattern:?}, {subject:?}) translated as {:?}",
            compile_pattern(pattern).unwrap().translated()
        );
    }
}
