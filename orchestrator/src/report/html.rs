//! The page: the overview, the engine comparisons and the validation reports rendered here
//! (readable without JavaScript), the trial data embedded as JSON for the page's one script,
//! and a Content-Security-Policy that allows that script by its hash and nothing else.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use elengtis_core::analysis::Analysis;
use elengtis_core::prove::report::render_panel;
use serde_json::{Value, json};
use sha2::Digest as _;

use super::ReportError;
use super::load::{Run, Validation};
use super::trials::Trials;

const STYLE: &str = include_str!("assets/report.css");
const SCRIPT: &str = include_str!("assets/report.js");

/// The metrics the overview shows, with their headings.
const METRICS: [(&str, &str); 4] = [
    ("proposed", "proposed"),
    ("completed", "completed"),
    ("safety_pass", "safety"),
    ("safe_completed", "safe-completed"),
];

/// Width of an interval plot, in px.
const PLOT_WIDTH: f64 = 120.0;
/// Margin at each end of a plot's axis.
const PLOT_MARGIN: f64 = 4.0;

/// What the page shows.
pub(super) struct PageInput<'a> {
    pub(super) runs: &'a [Run],
    pub(super) analysis: Option<&'a Analysis>,
    pub(super) trials: &'a Trials,
    pub(super) validations: &'a [Validation],
}

/// Text as HTML: `&`, `<`, `>`, `"` and `'` escaped (safe in text and in quoted attributes).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON for a `<script type="application/json">` element: `<`, `>` and `&` as `\u` escapes, so
/// no text in it can close the element or open a comment, and U+2028/U+2029 escaped too (they
/// end a line in older JavaScript). These characters only ever occur inside JSON strings, where
/// the escapes mean the same text.
pub(super) fn embed_json(value: &Value) -> Result<String, ReportError> {
    let text = serde_json::to_string(value).map_err(ReportError::Encode)?;
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Standard base64 with padding (RFC 4648), for the policy's hashes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `'sha256-…'` of an inline element's text, as a policy source.
fn hash_source(text: &str) -> String {
    format!("'sha256-{}'", base64(&sha2::Sha256::digest(text.as_bytes())))
}

/// The page's policy: nothing is loaded or connected to; the one script and the one style
/// element run by their hashes; images only from `data:` URLs.
pub(super) fn policy() -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        hash_source(SCRIPT),
        hash_source(STYLE)
    )
}

/// The whole page.
pub(super) fn page(input: &PageInput<'_>) -> Result<String, ReportError> {
    let mut body = String::new();
    let trials = input.trials.len();
    let _ = write!(
        body,
        "<header><h1>elengtis report</h1><p class=\"lede\">{} results director{}, {trials} trial{}, {} validation report{}</p><nav><a href=\"#overview\">Overview</a> <a href=\"#comparisons\">Engine comparisons</a> <a href=\"#validation\">Validation reports</a> <a href=\"#trials\">Trials</a></nav></header>",
        input.runs.len(),
        if input.runs.len() == 1 { "y" } else { "ies" },
        if trials == 1 { "" } else { "s" },
        input.validations.len(),
        if input.validations.len() == 1 { "" } else { "s" },
    );
    body.push_str(&integrity_banner(input.runs, input.validations.len()));
    body.push_str(&inputs_section(input.runs));
    body.push_str(&overview_section(input.analysis));
    body.push_str(&comparisons_section(input.analysis));
    body.push_str(&validation_section(input.validations));
    body.push_str(&trials_section(input.trials));

    let runs: Vec<Value> =
        input.runs.iter().map(|run| json!({"label": run.label(), "run_id": run.manifest.get("run_id")})).collect();
    let _ = write!(
        body,
        "<script type=\"application/json\" id=\"report-runs\">{}</script>",
        embed_json(&Value::Array(runs))?
    );
    let _ = write!(
        body,
        "<script type=\"application/json\" id=\"trial-index\">{}</script>",
        embed_json(&Value::Array(input.trials.index.clone()))?
    );
    for (n, detail) in input.trials.details.iter().enumerate() {
        let _ = write!(body, "<script type=\"application/json\" id=\"trial-d-{n}\">{}</script>", embed_json(detail)?);
    }
    Ok(document(&body, true))
}

/// A page of its own (`scan.html`): `body` under `title`, with the report's style and policy,
/// and no script.
pub(crate) fn static_page(title: &str, body: &str) -> String {
    document(body, false).replacen("<title>elengtis report</title>", &format!("<title>{}</title>", escape(title)), 1)
}

/// The page around `body`: its policy, style and (when `script`) its one script.
fn document(body: &str, script: bool) -> String {
    let script = if script { format!("<script>{SCRIPT}</script>") } else { String::new() };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta name=\"referrer\" content=\"no-referrer\"><title>elengtis report</title><link rel=\"icon\" href=\"data:,\"><style>{STYLE}</style></head><body>{body}{script}</body></html>\n",
        policy = escape(&policy()),
    )
}

/// Integrity statuses from the strongest to the weakest: the banner shows the weakest of the
/// inputs first.
const STATUS_ORDER: [&str; 6] = [
    "verified_signed",
    "verified_signature_unchecked",
    "verified_unsigned",
    "unsealed",
    "legacy_unverified",
    "refused",
];

/// The banner at the top of the page (it stays in view: CSS `position: sticky`): what
/// `verify` established about each results directory, the weakest first.
fn integrity_banner(runs: &[Run], validations: usize) -> String {
    let rank = |status: &str| STATUS_ORDER.iter().position(|s| *s == status).unwrap_or(STATUS_ORDER.len());
    let weakest = runs.iter().map(|run| run.integrity.status).max_by_key(|status| rank(status));
    let class = weakest.unwrap_or("legacy_unverified");
    let mut out = format!("<div class=\"integrity integrity-{class}\" role=\"status\"><strong>Integrity</strong>");
    let headline = match weakest {
        Some("verified_signed") => "every results directory verified, sealed and signed by the key given",
        Some("verified_signature_unchecked") => "verified; a signature was not checked (no key given)",
        Some("verified_unsigned") => "verified, unsigned: anyone can recompute an unsigned seal",
        Some("unsealed") => "unsealed results: nothing anchors their end",
        Some("legacy_unverified") => "legacy results: their integrity cannot be established",
        Some(_) => "refused",
        None => "no results directory",
    };
    let _ = write!(out, ": {}<ul>", escape(headline));
    for run in runs {
        let _ = write!(
            out,
            "<li><span class=\"mono\">{}</span>: {}</li>",
            escape(&run.label()),
            escape(&run.integrity.says)
        );
    }
    if validations > 0 {
        out.push_str(
            "<li>validation reports: shown as written (they carry no seal; the results directories of their legs, when given, are checked above)</li>",
        );
    }
    out.push_str("</ul></div>");
    out
}

/// The page of a refused results directory: the refusal in the banner, the problems, and
/// nothing of any input (no figure, no trial).
pub(super) fn refusal(dir: &std::path::Path, says: &str, problems: &str) -> String {
    let mut body = format!(
        "<header><h1>elengtis report</h1><p class=\"lede\">refused: nothing is shown</p></header><div class=\"integrity integrity-refused\" role=\"alert\"><strong>Integrity</strong>: {}<ul><li><span class=\"mono\">{}</span>: check it with <code>elengtis verify {}</code></li></ul></div>",
        escape(says),
        escape(&dir.display().to_string()),
        escape(&dir.display().to_string()),
    );
    if !problems.is_empty() {
        let _ = write!(body, "<section id=\"problems\"><h2>Problems</h2><pre>{}</pre></section>", escape(problems));
    }
    document(&body, false)
}

fn inputs_section(runs: &[Run]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"inputs\"><h2>Results directories</h2><table><thead><tr><th>directory</th><th>run id</th><th>started</th><th>rows</th></tr></thead><tbody>",
    );
    for run in runs {
        let text = |name: &str| run.manifest.get(name).and_then(Value::as_str).unwrap_or("").to_owned();
        let _ = write!(
            out,
            "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            escape(&run.label()),
            escape(&text("run_id")),
            escape(&text("started_at")),
            run.rows.len()
        );
    }
    out.push_str("</tbody></table></section>");
    out
}

fn num(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

fn str_of<'a>(value: &'a Value, name: &str) -> &'a str {
    value.get(name).and_then(Value::as_str).unwrap_or("")
}

/// `0.25` → `25.0%`.
fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn x_of(fraction: f64) -> f64 {
    PLOT_MARGIN + fraction.clamp(0.0, 1.0) * (PLOT_WIDTH - 2.0 * PLOT_MARGIN)
}

/// An interval plot: the axis (0, 50 %, 100 %), the interval as a band, the estimate as a dot.
pub(crate) fn interval_svg(low: f64, high: f64, point: f64, label: &str) -> String {
    let (x_low, x_high, x_point) = (x_of(low), x_of(high), x_of(point));
    format!(
        "<svg class=\"ci\" viewBox=\"0 0 {w} 16\" width=\"{w}\" height=\"16\" role=\"img\" aria-label=\"{label}\"><title>{label}</title><line class=\"axis\" x1=\"{a}\" y1=\"8\" x2=\"{b}\" y2=\"8\"/><line class=\"tick\" x1=\"{a}\" y1=\"4\" x2=\"{a}\" y2=\"12\"/><line class=\"tick\" x1=\"{m}\" y1=\"5\" x2=\"{m}\" y2=\"11\"/><line class=\"tick\" x1=\"{b}\" y1=\"4\" x2=\"{b}\" y2=\"12\"/><rect class=\"band\" x=\"{x_low:.2}\" y=\"4\" width=\"{width:.2}\" height=\"8\" rx=\"2\"/><circle class=\"point\" cx=\"{x_point:.2}\" cy=\"8\" r=\"3\"/></svg>",
        w = PLOT_WIDTH,
        a = PLOT_MARGIN,
        b = PLOT_WIDTH - PLOT_MARGIN,
        m = PLOT_WIDTH / 2.0,
        width = (x_high - x_low).max(1.0),
    )
}

fn metric_cell(cell: &Value, metric: &str, heading: &str) -> String {
    let rate = &cell[metric];
    let (successes, known, unknown) = (num(&rate["successes"]), num(&rate["known"]), num(&rate["unknown"]));
    let mut attrs = format!(
        "data-model=\"{}\" data-engine=\"{}\" data-scenario=\"{}\" data-metric=\"{}\" data-successes=\"{successes}\" data-known=\"{known}\" data-unknown=\"{unknown}\"",
        escape(str_of(cell, "model_id")),
        escape(str_of(cell, "engine")),
        escape(str_of(cell, "scenario")),
        escape(metric),
    );
    let interval =
        rate["wilson_95"].as_array().and_then(|pair| Some((pair.first()?.as_f64()?, pair.get(1)?.as_f64()?)));
    let unknown_text =
        if unknown > 0 { format!("<span class=\"unknown\">{unknown} unknown</span>") } else { String::new() };
    let Some((low, high)) = interval.filter(|_| known > 0) else {
        let what = if metric == "safety_pass" || metric == "safe_completed" {
            "not applicable / not known"
        } else {
            "none known"
        };
        return format!(
            "<td class=\"metric\" {attrs}><span class=\"frac\">0/0</span> <span class=\"na\">{what}</span> {unknown_text}</td>"
        );
    };
    let _ = write!(attrs, " data-low=\"{low}\" data-high=\"{high}\"");
    #[allow(clippy::cast_precision_loss)] // counts of trials
    let point = successes as f64 / known as f64;
    let label = format!(
        "{heading}: {successes} of {known} known ({}); Wilson 95% interval {} to {}{}",
        percent(point),
        percent(low),
        percent(high),
        if unknown > 0 { format!("; {unknown} unknown") } else { String::new() }
    );
    format!(
        "<td class=\"metric\" {attrs}><span class=\"frac\">{successes}/{known}</span> <span class=\"pct\">{}</span> {unknown_text}<br>{}<br><span class=\"ci-text\">95% CI {}–{}</span></td>",
        percent(point),
        interval_svg(low, high, point, &escape(&label)),
        percent(low),
        percent(high),
    )
}

fn counts_text(map: &Value) -> String {
    map.as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{} {}", escape(k), num(v))).collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

fn overview_section(analysis: Option<&Analysis>) -> String {
    let mut out = String::from("<section id=\"overview\"><h2>Overview</h2>");
    let Some(analysis) = analysis else {
        out.push_str("<p class=\"note\">No results directory was given.</p></section>");
        return out;
    };
    out.push_str("<p class=\"note\">Per model × engine × scenario, from <code>elengtis analyze</code>: successes / known outcomes, the Wilson 95% interval (band) around the estimate (dot) on a 0–100% axis. Unknown outcomes (incomplete trials, verifiers that could not decide, trials that never ran) never enter a denominator.</p>");
    out.push_str("<table class=\"overview\"><thead><tr><th>model</th><th>engine</th><th>scenario</th><th>trials</th>");
    for (_, heading) in METRICS {
        let _ = write!(out, "<th>{heading}</th>");
    }
    out.push_str("<th>incomplete</th><th>terminations</th><th>cost</th></tr></thead><tbody>");
    // Campaigns shown apart: each cell names the inputs that ran its campaign.
    let campaigns = analysis.json["campaigns"].as_array().map_or(0, Vec::len);
    let campaign_label = |cell: &Value| -> String {
        if campaigns < 2 || analysis.json["pooled"] == true {
            return String::new();
        }
        let label = analysis.json["campaigns"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["campaign"] == cell["campaign"])
            .map_or("", |c| str_of(c, "label"));
        format!("<br><span class=\"small muted\" data-campaign=\"{0}\">campaign: {0}</span>", escape(label))
    };
    for cell in analysis.json["cells"].as_array().into_iter().flatten() {
        let _ = write!(
            out,
            "<tr class=\"cell\"><td class=\"mono label-col\">{}</td><td>{}</td><td class=\"mono label-col\">{}{}</td><td class=\"num\" data-trials=\"{}\">{}{}{}</td>",
            escape(str_of(cell, "model_id")),
            escape(str_of(cell, "engine")),
            escape(str_of(cell, "scenario")),
            campaign_label(cell),
            num(&cell["trials"]),
            num(&cell["trials"]),
            if num(&cell["not_run"]) > 0 {
                format!("<br><span class=\"unknown\">{} not run</span>", num(&cell["not_run"]))
            } else {
                String::new()
            },
            if num(&cell["retries"]) > 0 {
                format!("<br><span class=\"muted\">{} retries</span>", num(&cell["retries"]))
            } else {
                String::new()
            },
        );
        for (metric, heading) in METRICS {
            out.push_str(&metric_cell(cell, metric, heading));
        }
        let incomplete = num(&cell["incomplete_trials"]);
        let classes = counts_text(&cell["failure_classes"]);
        let cost = cell["usage"]["cost_usd"].as_f64().map_or_else(|| "—".to_owned(), |c| format!("${c:.4}"));
        let unknown_costs = num(&cell["usage"]["unknown_costs"]);
        let _ = write!(
            out,
            "<td class=\"num\">{incomplete}{}</td><td class=\"small\">{}</td><td class=\"num\">{cost}{}</td></tr>",
            if classes.is_empty() { String::new() } else { format!("<br><span class=\"small\">{classes}</span>") },
            counts_text(&cell["terminations"]),
            if unknown_costs > 0 {
                format!("<br><span class=\"muted\">{unknown_costs} without a cost</span>")
            } else {
                String::new()
            },
        );
    }
    out.push_str("</tbody></table>");
    if analysis.not_run > 0 {
        let _ = write!(
            out,
            "<p class=\"warn\">{} trial{} of the recorded matri{} never ran (counted as not run); finish with <code>elengtis run --resume --out DIR</code>.</p>",
            analysis.not_run,
            if analysis.not_run == 1 { "" } else { "s" },
            if analysis.json["inputs"].as_array().map_or(0, Vec::len) == 1 { "x" } else { "ces" }
        );
    }
    out.push_str("</section>");
    out
}

fn comparisons_section(analysis: Option<&Analysis>) -> String {
    let comparisons = analysis.and_then(|a| a.json["comparisons"].as_array()).cloned().unwrap_or_default();
    let mut out = String::from("<section id=\"comparisons\"><h2>Engine comparisons</h2>");
    if comparisons.is_empty() {
        out.push_str("<p class=\"note\">None: paired comparisons need runs with an <code>experiment.block</code> and at least two engines per model and scenario.</p></section>");
        return out;
    }
    out.push_str("<p class=\"note\">Within-block differences (right − left, percentage points) with a bootstrap 95% interval on a −100…+100 axis; the middle tick is no difference.</p><table><thead><tr><th>model</th><th>scenario</th><th>left → right</th><th>metric</th><th>blocks</th><th>difference</th></tr></thead><tbody>");
    for c in &comparisons {
        let difference = c["difference_pp"].as_f64().unwrap_or(0.0);
        let (low, high) = (c["bootstrap_95"][0].as_f64().unwrap_or(0.0), c["bootstrap_95"][1].as_f64().unwrap_or(0.0));
        let to_fraction = |pp: f64| (pp + 100.0) / 200.0;
        let label = escape(&format!("{difference:+.1} pp, bootstrap 95% interval {low:+.1} to {high:+.1} pp"));
        let _ = write!(
            out,
            "<tr class=\"comparison\" data-metric=\"{}\" data-difference=\"{difference}\" data-low=\"{low}\" data-high=\"{high}\"><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{} → {}</td><td>{}</td><td class=\"num\">{}</td><td>{difference:+.1} pp<br>{}<br><span class=\"ci-text\">95% CI {low:+.1} to {high:+.1} pp</span></td></tr>",
            escape(str_of(c, "metric")),
            escape(str_of(c, "model_id")),
            escape(str_of(c, "scenario")),
            escape(str_of(c, "left")),
            escape(str_of(c, "right")),
            escape(str_of(c, "metric")),
            num(&c["blocks"]),
            interval_svg(to_fraction(low), to_fraction(high), to_fraction(difference), &label),
        );
    }
    out.push_str("</tbody></table></section>");
    out
}

/// A reading as text: `fired (state)`, `no_verdict: why`; a run of a validation report holds
/// its reading under `reading`, with its evidence file beside it.
fn reading_text(run: &Value) -> String {
    if let Some(inner) = run.get("reading").filter(|r| r.is_object()) {
        let text = reading_text(inner);
        return match run.get("evidence").and_then(Value::as_str) {
            Some(evidence) => format!("{text} [{evidence}]"),
            None => text,
        };
    }
    let reading = str_of(run, "reading");
    match (run.get("tier").and_then(Value::as_str), run.get("why").and_then(Value::as_str)) {
        (Some(tier), _) => format!("{reading} ({tier})"),
        (None, Some(why)) => format!("{reading}: {why}"),
        _ => reading.to_owned(),
    }
}

fn validation_section(validations: &[Validation]) -> String {
    let mut out = String::from("<section id=\"validation\"><h2>Validation reports</h2>");
    if validations.is_empty() {
        out.push_str("<p class=\"note\">None given (<code>elengtis prove</code> and <code>elengtis gate</code> write <code>validation_report.json</code>; pass their output directory as an input).</p></section>");
        return out;
    }
    for validation in validations {
        let report = &validation.report;
        let value = serde_json::to_value(report).unwrap_or(Value::Null);
        let verdict_class = match str_of(&value, "verdict") {
            "kept" => "kept",
            "stable_not_proven" => "stable",
            "not_tested" => "untested",
            _ => "rejected",
        };
        let _ = write!(
            out,
            "<article class=\"validation\" data-seed=\"{}\" data-verdict=\"{}\"><h3><span class=\"verdict {verdict_class}\">{}</span> {} <span class=\"muted\">{}</span></h3><p class=\"small mono\">{}</p><h4>Trust panel</h4><pre class=\"panel\">{}</pre>",
            escape(&report.seed),
            escape(str_of(&value, "verdict")),
            escape(&report.verdict_label),
            escape(&report.seed),
            escape(&report.title),
            escape(&validation.path.display().to_string()),
            escape(&render_panel(report)),
        );
        out.push_str("<h4>Legs</h4><table class=\"legs\"><thead><tr><th>side</th><th>runs</th><th>fired (state / target-reported / trace / judge-only)</th><th>resisted</th><th>not tested</th><th>no verdict</th><th>each run</th></tr></thead><tbody>");
        for side in ["vulnerable", "guarded"] {
            let leg = &value["legs"][side];
            if leg.is_null() {
                let _ = write!(out, "<tr><td>{side}</td><td colspan=\"6\" class=\"muted\">no {side} side</td></tr>");
                continue;
            }
            let c = &leg["counts"];
            let readings: Vec<String> =
                leg["runs"].as_array().into_iter().flatten().map(|r| escape(&reading_text(r))).collect();
            let _ = write!(
                out,
                "<tr class=\"leg\" data-side=\"{side}\"><td>{side}</td><td class=\"num\">{}</td><td class=\"num\">{} / {} / {} / {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"small\">{}</td></tr>",
                num(&c["runs"]),
                num(&c["fired"]["state"]),
                num(&c["fired"]["target_reported"]),
                num(&c["fired"]["trace"]),
                num(&c["fired"]["judge_only"]),
                num(&c["resisted"]),
                num(&c["not_tested"]),
                num(&c["no_verdict"]),
                readings.join("; "),
            );
        }
        out.push_str("</tbody></table>");
        if let Some(judge) = &report.judge {
            // The LLM judge's consensus figures beside the legs: a judge-only fire is never
            // shown without them.
            let _ = write!(
                out,
                "<h4>LLM judge</h4><p class=\"small\">{} · k={} · floor {} · rubric sha256 <span class=\"mono\">{}</span>{}</p><table class=\"judge\"><thead><tr><th>side</th><th>runs judged</th><th>landed</th><th>not landed</th><th>undecided</th><th>calls</th><th>ruled</th><th>excluded</th></tr></thead><tbody>",
                escape(judge.model.as_deref().unwrap_or("no model configured")),
                judge.k,
                judge.confidence_floor,
                escape(judge.rubric_sha256.get(..12).unwrap_or_default()),
                judge.unavailable.as_deref().map(|why| format!(" · not asked: {}", escape(why))).unwrap_or_default(),
            );
            let sides = [
                ("vulnerable", Some(judge.vulnerable)),
                ("guarded", judge.guarded),
                ("every judged run", Some(judge.all)),
            ];
            for (side, figures) in sides {
                let Some(f) = figures else { continue };
                let _ = write!(
                    out,
                    "<tr class=\"judge-side\" data-side=\"{side}\"><td>{side}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    f.runs, f.landed, f.not_landed, f.undecided, f.calls, f.ruled, f.excluded
                );
            }
            out.push_str("</tbody></table><p class=\"small\">Judge-only fires never keep a finding alone.</p>");
        }
        if let Some(rows) = value["metamorphic"]["rows"].as_array() {
            out.push_str("<h4>Metamorphic rewrites</h4><table><thead><tr><th>rewrite</th><th>vulnerable</th><th>guarded</th><th>holds</th></tr></thead><tbody>");
            for row in rows {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(str_of(row, "kind")),
                    escape(&reading_text(&row["vulnerable"])),
                    escape(&reading_text(&row["guarded"])),
                    if row["holds"] == Value::Bool(true) {
                        "yes".to_owned()
                    } else {
                        format!("no: {}", escape(str_of(row, "why_not")))
                    },
                );
            }
            out.push_str("</tbody></table>");
        }
        let _ = write!(
            out,
            "<h4>Kill matrix</h4><p class=\"small\">mutation score {}/{} ({})</p><table class=\"kill\"><thead><tr><th>seed</th><th>status</th></tr></thead><tbody>",
            report.mutation.killed,
            report.mutation.total,
            escape(&report.mutation.scope)
        );
        for entry in &report.mutation.matrix {
            let status = entry.status.as_str();
            let _ = write!(
                out,
                "<tr class=\"kill-{status}\" data-seed=\"{}\" data-status=\"{status}\"><td class=\"mono\">{}</td><td>{}</td></tr>",
                escape(&entry.seed),
                escape(&entry.seed),
                status.replace('_', " ")
            );
        }
        out.push_str("</tbody></table>");
        if !report.reasons.is_empty() {
            out.push_str("<h4>Reasons</h4><ul>");
            for reason in &report.reasons {
                let _ = write!(out, "<li>{}</li>", escape(reason));
            }
            out.push_str("</ul>");
        }
        let _ = write!(out, "<p><strong>Claim:</strong> {}</p></article>", escape(&report.claim));
    }
    out.push_str("</section>");
    out
}

fn options(values: &BTreeSet<String>) -> String {
    values.iter().map(|v| format!("<option value=\"{0}\">{0}</option>", escape(v))).collect()
}

fn trials_section(trials: &Trials) -> String {
    let collect = |field: &str| -> BTreeSet<String> {
        trials.index.iter().filter_map(|t| t[field].as_str().map(str::to_owned)).collect()
    };
    format!(
        "<section id=\"trials\"><h2>Trials</h2><noscript><p class=\"warn\">The trajectories, verifiers and lifecycle records of the {n} are rendered by the page's script, which is disabled; the overview above needs none.</p></noscript><div class=\"filters\"><label>scenario <select id=\"f-scenario\"><option value=\"\">all</option>{}</select></label> <label>outcome <select id=\"f-outcome\"><option value=\"\">all</option><option value=\"completed\">completed</option><option value=\"not_completed\">not completed</option><option value=\"unknown\">unknown</option><option value=\"not_run\">not run</option></select></label> <label>termination <select id=\"f-termination\"><option value=\"\">all</option>{}</select></label> <label>search <input id=\"f-search\" type=\"search\" placeholder=\"trial id, tool, rule, error…\"></label> <label class=\"small\"><input id=\"f-deep\" type=\"checkbox\"> also search trajectories</label></div><p id=\"trial-count\" class=\"small\"></p><div id=\"trial-list\" data-total=\"{n}\"></div><nav id=\"pager\"></nav></section>",
        options(&collect("scenario")),
        options(&collect("termination")),
        n = elengtis_core::format::quote::count(trials.len(), "trial"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_end_its_script_element_and_reads_back_the_same() {
        let hostile = "</script><script>alert(1)</script><!-- & \u{2028}\u{2029} -->";
        let value = json!({"text": hostile, "<key>": ["a&b"]});
        let embedded = embed_json(&value).expect("encodes");
        for forbidden in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
            assert!(!embedded.contains(forbidden), "{forbidden:?} in {embedded}");
        }
        let back: Value = serde_json::from_str(&embedded).expect("still JSON");
        assert_eq!(back, value);
    }

    #[test]
    fn html_escaping_covers_text_and_quoted_attributes() {
        assert_eq!(escape("<img src=x onerror=\"a\">'&"), "&lt;img src=x onerror=&quot;a&quot;&gt;&#39;&amp;");
    }

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
    }

    #[test]
    fn the_assets_cannot_end_their_elements_and_the_policy_names_their_hashes() {
        assert!(!SCRIPT.to_ascii_lowercase().contains("</script"));
        assert!(!STYLE.to_ascii_lowercase().contains("</style"));
        let policy = policy();
        assert!(policy.starts_with("default-src 'none'; script-src 'sha256-"), "{policy}");
        assert!(policy.contains(&hash_source(SCRIPT)) && policy.contains(&hash_source(STYLE)), "{policy}");
        // sha256 of "abc", base64 (FIPS 180-2's test vector).
        assert_eq!(hash_source("abc"), "'sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0='");
    }

    #[test]
    fn comparisons_and_cells_show_the_analysis_figures_and_escape_labels() {
        let analysis = Analysis {
            json: json!({
                "cells": [{"model_id": "<b>m</b>", "engine": "graph", "scenario": "s", "trials": 3, "complete_trials": 2,
                    "incomplete_trials": 1, "not_run": 0, "retries": 0, "failure_classes": {"verification_error": 1},
                    "terminations": {"model_stop": 3},
                    "proposed": {"successes": 1, "known": 2, "unknown": 1, "wilson_95": [0.1, 0.9]},
                    "completed": {"successes": 0, "known": 0, "unknown": 3, "wilson_95": null},
                    "safety_pass": {"successes": 0, "known": 0, "unknown": 3, "wilson_95": null},
                    "safe_completed": {"successes": 0, "known": 0, "unknown": 3, "wilson_95": null},
                    "usage": {"cost_usd": null, "unknown_costs": 0}}],
                "comparisons": [{"model_id": "m", "scenario": "s", "left": "graph", "right": "reference", "metric": "proposed",
                    "blocks": 4, "difference_pp": -25.0, "bootstrap_95": [-50.0, 0.0]}],
                "inputs": [{}],
            }),
            markdown: String::new(),
            not_run: 0,
            trials: Vec::new(),
            campaigns: 1,
        };
        let overview = overview_section(Some(&analysis));
        assert!(overview.contains("data-model=\"&lt;b&gt;m&lt;/b&gt;\""), "{overview}");
        assert!(!overview.contains("<b>"), "{overview}");
        assert!(overview.contains("data-metric=\"proposed\" data-successes=\"1\" data-known=\"2\" data-unknown=\"1\" data-low=\"0.1\" data-high=\"0.9\""), "{overview}");
        assert!(
            overview.contains("<span class=\"frac\">0/0</span> <span class=\"na\">none known</span>"),
            "{overview}"
        );
        let comparisons = comparisons_section(Some(&analysis));
        assert!(comparisons.contains("data-difference=\"-25\" data-low=\"-50\" data-high=\"0\""), "{comparisons}");
        assert!(comparisons.contains("-25.0 pp") && comparisons.contains("graph → reference"), "{comparisons}");
        // −25 pp sits at a quarter of the way from the middle towards −100: x = 4 + 0.375 × 112.
        assert!(comparisons.contains("cx=\"46.00\""), "{comparisons}");
    }

    #[test]
    fn an_interval_plot_places_band_and_point_on_the_axis() {
        let svg = interval_svg(0.0, 1.0, 0.5, "x");
        assert!(
            svg.contains("x=\"4.00\"") && svg.contains("width=\"112.00\"") && svg.contains("cx=\"60.00\""),
            "{svg}"
        );
    }
}
