//! `scan.html`: what a scan found, as a page of its own beside `scan.json` (docs/scan.md,
//! "Hand-off") — the candidates ranked with their intervals, statuses, reasons and proofs; the
//! tools with their roles; the server's own directive-shaped descriptions; why a class gave
//! none. Static (no script), with the report's style and policy: everything the server
//! wrote (tool names, descriptions, excerpts) is text, never markup.

use std::fmt::Write as _;

use elengtis_core::format::quote::count;

use super::{Candidate, CandidateStatus, ScanReport};
use crate::report::html::{escape, interval_svg, static_page};

fn status_class(status: CandidateStatus) -> &'static str {
    match status {
        CandidateStatus::Fired => "verdict rejected",
        CandidateStatus::Resisted => "verdict kept",
        CandidateStatus::Undecided => "verdict stable",
        _ => "verdict untested",
    }
}

fn candidate_row(c: &Candidate) -> String {
    let (rate, plot) = match &c.run {
        Some(r) if r.decided > 0 => {
            let point = f64::from(r.fires) / f64::from(r.decided);
            let label =
                format!("{}/{} fired, 95% interval {:.2}–{:.2}", r.fires, r.decided, r.interval[0], r.interval[1]);
            (
                format!("{}/{} <span class=\"muted\">({})</span>", r.fires, r.decided, count(r.trials, "trial")),
                interval_svg(r.interval[0], r.interval[1], point, &escape(&label)),
            )
        }
        Some(r) => (format!("— <span class=\"muted\">({})</span>", count(r.trials, "trial")), String::new()),
        None => ("—".into(), String::new()),
    };
    let proof = c.proof.as_ref().map_or_else(String::new, |p| {
        format!(
            "<br><span class=\"small\">proved against {}: <strong>{}</strong> — <a href=\"{}\">{}</a></span>",
            escape(&p.guarded_side),
            escape(&p.verdict),
            escape(&p.report),
            escape(&p.report)
        )
    });
    let seed = c.seed_file.as_ref().map_or_else(String::new, |f| {
        format!("<br><span class=\"small mono\"><a href=\"{}\">{}</a></span>", escape(f), escape(f))
    });
    format!(
        "<tr class=\"candidate\" data-status=\"{status}\"><td><span class=\"{class}\">{status}</span></td><td class=\"mono\">{id}{seed}</td><td>{class_name} {style}</td><td>{path}<br><span class=\"small muted\">verified by {check}</span></td><td class=\"num\">{rate}</td><td>{plot}</td><td class=\"small\">{why}{proof}</td></tr>",
        status = c.status.as_str(),
        class = status_class(c.status),
        id = escape(&c.id),
        class_name = escape(&c.class.to_string()),
        style = escape(c.style.as_str()),
        path = escape(&c.path()),
        check = escape(&c.verifier.describe()),
        why = escape(c.why.as_deref().unwrap_or("")),
    )
}

/// The page.
pub fn page(report: &ScanReport) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<header><h1>elengtis scan: {}</h1><p class=\"lede\">{} tool{}, {} candidate{}: {}</p></header>",
        escape(&report.target),
        report.tools.len(),
        if report.tools.len() == 1 { "" } else { "s" },
        report.candidates.len(),
        if report.candidates.len() == 1 { "" } else { "s" },
        escape(&super::status_counts(report)),
    );
    if let Some(rule) = &report.stopping {
        let _ = write!(
            body,
            "<p class=\"note\">Each candidate ran until the 95% Wilson interval of its fire rate lay above or below {:.2} ({}; at most {}){}.{}</p>",
            rule.threshold,
            if rule.sequential { "sequential stopping" } else { "fixed iterations" },
            count(rule.max_trials, "trial"),
            report.trials.map_or_else(String::new, |t| format!(
                ": {} run, fixed iterations would have run {}",
                count(t.run, "trial"),
                t.fixed
            )),
            report.model.as_ref().map_or_else(
                || " The model: each candidate's script.".to_owned(),
                |m| format!(" The model: {}.", escape(&m.model))
            ),
        );
    } else {
        body.push_str("<p class=\"note\">Listed only (<code>--dry-run</code>): nothing was run.</p>");
    }
    body.push_str("<section id=\"candidates\"><h2>Candidates</h2><table class=\"candidates\"><thead><tr><th>status</th><th>candidate</th><th>class</th><th>path and check</th><th>fired</th><th>interval</th><th>why</th></tr></thead><tbody>");
    let mut ranked: Vec<&Candidate> = report.candidates.iter().collect();
    ranked.sort_by_key(|c| super::rank(c));
    for c in ranked {
        body.push_str(&candidate_row(c));
    }
    body.push_str("</tbody></table>");
    for why in &report.not_made {
        let _ = write!(body, "<p class=\"small muted not-made\">none: {}</p>", escape(why));
    }
    // The planner's answer is a model's text: shown as text, like the server's.
    if let Some(p) = &report.planner {
        let _ = write!(
            body,
            "<p class=\"note planner\">Planner ({}): {} — <a href=\"{}\">its decision</a></p>",
            escape(&p.model.model),
            escape(p.decision.as_str()),
            escape(&p.decision_file)
        );
        if !p.reasons.is_empty() {
            body.push_str("<ul class=\"small planner-reasons\">");
            for reason in &p.reasons {
                let _ = write!(body, "<li>{}</li>", escape(reason));
            }
            body.push_str("</ul>");
        }
    }
    body.push_str("</section><section id=\"tools\"><h2>Tools and their roles</h2><table><thead><tr><th>tool</th><th>roles</th><th>from</th></tr></thead><tbody>");
    for tool in &report.tools {
        let roles: Vec<&str> = tool.roles.iter().map(|r| r.as_str()).collect();
        let words: Vec<String> = tool.reasons.iter().map(|r| format!("{}: {}", r.role.as_str(), r.word)).collect();
        let _ = write!(
            body,
            "<tr class=\"tool\"><td class=\"mono\">{}</td><td>{}</td><td class=\"small muted\">{}</td></tr>",
            escape(&tool.tool),
            escape(&if roles.is_empty() { "no role".to_owned() } else { roles.join(", ") }),
            escape(&words.join("; "))
        );
    }
    body.push_str("</tbody></table></section><section id=\"descriptions\"><h2>The server's own descriptions (W1)</h2>");
    if report.description_findings.is_empty() {
        body.push_str("<p>No directive-shaped text.</p>");
    } else {
        body.push_str("<table><thead><tr><th>tool</th><th>kind</th><th>excerpt</th></tr></thead><tbody>");
        for f in &report.description_findings {
            let _ = write!(
                body,
                "<tr class=\"description-finding\"><td class=\"mono\">{}</td><td>{}</td><td class=\"mono small\">{}</td></tr>",
                escape(&f.tool),
                escape(f.kind.as_str()),
                escape(&f.excerpt)
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    static_page(&format!("elengtis scan: {}", report.target), &body)
}
