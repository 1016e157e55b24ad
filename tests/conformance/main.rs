//! Differential conformance with the original Python tool, PyPI `elengtis==0.1.0`.
//!
//! The compat JSON Schemas describe shape, not behaviour; this suite holds the behaviour by
//! running the original itself (installed into `<target>/conformance-venv`, see
//! `elengtis_tests::original`) next to elengtis on the same inputs:
//!
//! * [`documents`]: the original's bundled campaign and scenarios and well over 500
//!   documents generated from them (`original.py`, deterministic) — both loaders must make
//!   the same accept/reject decision, and name the same trials;
//! * [`outcomes`]: model-free and reference-engine campaigns over the bundled scenarios,
//!   run by both runners against the original's fixture server — the same per-trial
//!   outcome fields;
//! * [`engines`]: the original's four engines live against our scripted model server, and
//!   ours through our OpenRouter provider — the same outcomes engine by engine;
//! * [`results`]: each tool's `analyze` over the other's result directories — the same
//!   counts, denominators and Wilson intervals;
//! * [`recommend`]: both tools' `analyze` over one shared set of blocked live-comparison
//!   results — the same `recovery_succeeded`, `tool_error_count` and `tool_sequences` per
//!   cell, and the same recommendation under the predeclared rule.
//!
//! Every disagreement must be listed, with its reason, in `baseline.txt`; an unlisted one
//! fails, and so does a listed one that agrees again (stale).

// Test names sort `documents` first, so the harness starts it beside `outcomes` (which makes
// the runs that `results` reads): the two halves of the suite overlap.
mod documents;
mod engines;
mod outcomes;
mod recommend;
mod results;
mod runs;
