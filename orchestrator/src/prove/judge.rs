//! Asking a seed's LLM judge about its recorded runs (docs/prove.md, "The LLM judge").
//!
//! After a finding's campaigns ran, every run the core says wants a judge
//! ([`elengtis_core::prove::judge_wanted`]: clean, delivered, no predicate fired) is shown to
//! the judge `k` times — its recorded transcript only, never the live target — through the
//! provider client every model call goes through (deadlines, retries, spend, keys read from the
//! environment and never written; `--record-fixtures` / `--replay-fixtures`, so `gate`
//! replays the judge offline like the agent). Each call's answer is read strictly
//! ([`JudgeCall::read`]) and the calls' consensus decides the run
//! ([`elengtis_core::prove::with_judgement`]).
//!
//! Each judged run leaves one evidence file, `<campaign>/judge/<trial id>.json`: the request
//! as sent, every raw answer, how each was read, the exchanges and the consensus.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use elengtis_core::format::gate::LiveModel;
use elengtis_core::format::seed::{LoadedSeed, SeedJudge};
use elengtis_core::prove::consensus::{Consensus, JudgeCall, consensus};
use elengtis_core::prove::judge::JudgeSummary;
use elengtis_core::prove::{LegContext, Side, judge_wanted};
use elengtis_core::records::Evidence;
use elengtis_core::refs::Values;
use serde::Serialize;
use serde_json::{Value, json};

use super::legs::{Recorded, delivery_stopped_by_guard};
use crate::model::providers::{Provider, ProviderConfig};
use crate::model::{Model as _, ModelContext, ModelOptions};

/// The judge's directory inside a campaign's directory.
pub const DIR: &str = "judge";

/// A seed's judge as this prove asks it: the seed's rubric, k and floor, and its model (the
/// seed's own, or `--judge-config`'s, which wins).
#[derive(Debug, Clone)]
pub struct JudgeSetup {
    /// The seed's judge declaration.
    pub declared: SeedJudge,
    /// The model asked (`None`: neither the seed nor `--judge-config` names one).
    pub model: Option<LiveModel>,
}

impl JudgeSetup {
    /// The setup of `seed`'s judge with `--judge-config`'s model `over` (when given); `None`
    /// for a seed without a judge.
    pub fn of(seed: &LoadedSeed, over: Option<&LiveModel>) -> Option<JudgeSetup> {
        let declared = seed.seed.judge.clone()?;
        let model = over.cloned().or_else(|| declared.model.clone());
        Some(JudgeSetup { declared, model })
    }

    /// `provider/model` of the judge's model.
    pub fn model_label(&self) -> Option<String> {
        self.model.as_ref().map(LiveModel::label)
    }

    /// SHA-256 of the rubric's text.
    pub fn rubric_sha256(&self) -> String {
        elengtis_core::format::sha256_hex(self.declared.rubric.as_bytes())
    }

    /// The report's summary before its figures are counted ([`elengtis_core::prove::build_report`]
    /// counts them from the runs), with the cost of the calls `judged` made.
    pub fn summary(&self, judged: &Judged) -> JudgeSummary {
        JudgeSummary {
            rubric_sha256: self.rubric_sha256(),
            model: self.model_label(),
            k: self.declared.calls(),
            confidence_floor: self.declared.floor(),
            unavailable: judged.unavailable.clone(),
            input_tokens: judged.input_tokens,
            output_tokens: judged.output_tokens,
            wall_ms: judged.wall_ms,
            vulnerable: Default::default(),
            guarded: None,
            all: Default::default(),
        }
    }

    /// Why the judge cannot be asked with `options` (checked before anything starts).
    pub fn unavailable(&self, options: &ModelOptions) -> Option<String> {
        let Some(model) = &self.model else {
            return Some(
                "the seed's judge names no model: give one in its `judge.model` or with --judge-config FILE".into(),
            );
        };
        crate::model::live_unavailable(model, "judge's", options)
    }
}

/// One campaign's runs to judge: its directory relative to the report's (`repeat`), its
/// recorded runs by target, and whether its scenario has verifiers.
#[derive(Debug)]
pub struct Batch<'a> {
    /// `repeat`, `metamorphic`, `carrier`.
    pub campaign: &'a str,
    /// Its runs by target.
    pub runs: &'a BTreeMap<String, Vec<Recorded>>,
    /// The scenario declares verify checks.
    pub has_verifiers: bool,
}

/// The judgements of a finding's runs, by campaign and trial id.
#[derive(Debug, Default)]
pub struct Judged {
    /// `(campaign, trial id)` → the consensus and its evidence file (relative to the report's
    /// directory).
    pub runs: BTreeMap<(String, String), (Consensus, String)>,
    /// Calls made.
    pub calls: u32,
    /// Tokens in and out over every call.
    pub input_tokens: u64,
    /// Tokens out.
    pub output_tokens: u64,
    /// Wall time spent judging, in milliseconds.
    pub wall_ms: u64,
    /// Why the judge could not be asked at all (the runs that wanted it are then no verdict).
    pub unavailable: Option<String>,
}

impl Judged {
    /// The judgement of `trial_id` in `campaign`, if it was judged.
    pub fn of(&self, campaign: &str, trial_id: &str) -> Option<&(Consensus, String)> {
        self.runs.get(&(campaign.to_owned(), trial_id.to_owned()))
    }
}

/// The side a campaign target stands for: `guarded`, `guarded-<rewrite>` and the guarded
/// calibration are the guarded side; anything else the vulnerable one.
fn side_of(target: &str) -> Side {
    if target == "guarded" || target.starts_with("guarded-") { Side::Guarded } else { Side::Vulnerable }
}

/// One call as its evidence file keeps it.
#[derive(Serialize)]
struct CallRecord {
    n: u32,
    raw: Option<String>,
    read: JudgeCall,
    latency_ms: u64,
    input_tokens: u64,
    output_tokens: u64,
    exchanges: Vec<Value>,
}

/// Ask the judge about every run of `batches` that wants it, writing each run's evidence file
/// under `report_dir`. A failed call is recorded and counts on neither side; only a file that
/// cannot be written is an error.
///
/// # Errors
///
/// A message naming the file that could not be written.
pub async fn judge_runs(
    seed: &LoadedSeed,
    setup: &JudgeSetup,
    options: &ModelOptions,
    report_dir: &Path,
    batches: &[Batch<'_>],
) -> Result<Judged, String> {
    let mut judged = Judged::default();
    let mut wanted: Vec<(&str, &Recorded, &Evidence)> = Vec::new();
    for batch in batches {
        for (target, runs) in batch.runs {
            let side = side_of(target);
            for recorded in runs {
                let Ok(evidence) = &recorded.evidence else { continue };
                let context = LegContext {
                    delivery: seed.seed.delivery,
                    markers: &seed.seed.markers,
                    has_verifiers: batch.has_verifiers,
                    side,
                    delivery_stopped_by_guard: side == Side::Guarded && delivery_stopped_by_guard(seed, evidence),
                    dispatched: &seed.seed.dispatched,
                    deferred: &seed.seed.deferred,
                    calibrated: false,
                };
                if judge_wanted(&recorded.row, evidence, &context).is_ok() {
                    wanted.push((batch.campaign, recorded, evidence));
                }
            }
        }
    }
    if wanted.is_empty() {
        return Ok(judged);
    }
    if let Some(why) = setup.unavailable(options) {
        judged.unavailable = Some(why);
        return Ok(judged);
    }
    let config = match setup.model.as_ref().map(|m| crate::model::live_config(m, "judge's")) {
        Some(Ok((_, config))) => config,
        Some(Err(e)) => {
            judged.unavailable = Some(e);
            return Ok(judged);
        }
        // Checked above: `unavailable` says why a judge without a model is not asked.
        None => return Ok(judged),
    };
    let ctx = ModelContext::new(options, 0.0).map_err(|e| format!("failed to set up the judge's model client: {e}"))?;
    let started = Instant::now();
    let k = setup.declared.calls();
    let config = &config;
    let ctx = &ctx;
    let futures = wanted.into_iter().enumerate().map(|(index, (campaign, recorded, evidence))| {
        let span = tracing::info_span!("judge", trial = %recorded.row.trial_id, k);
        let index = JudgeCallIndex(u32::try_from(index).unwrap_or(u32::MAX));
        tracing::Instrument::instrument(
            judge_one(setup, config, ctx, report_dir, index, campaign, recorded, evidence),
            span,
        )
    });
    // A few runs at once (the provider's own limit still holds); each run's calls in order.
    let mut results = futures_util::StreamExt::buffered(futures_util::stream::iter(futures), RUNS_AT_ONCE);
    while let Some(result) = futures_util::StreamExt::next(&mut results).await {
        let one = result?;
        judged.calls += one.calls;
        judged.input_tokens += one.input_tokens;
        judged.output_tokens += one.output_tokens;
        judged.runs.insert(one.key, (one.consensus, one.file));
    }
    judged.wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(judged)
}

/// Runs judged at once.
const RUNS_AT_ONCE: usize = 4;

/// A run's place in the finding's judged runs (its calls' fixture samples follow from it).
#[derive(Debug, Clone, Copy)]
struct JudgeCallIndex(u32);

/// What judging one run gave.
struct OneRun {
    key: (String, String),
    consensus: Consensus,
    file: String,
    calls: u32,
    input_tokens: u64,
    output_tokens: u64,
}

/// Ask the judge `k` times about one run and write its evidence file.
#[allow(clippy::too_many_arguments, reason = "one call site; the pieces are the run's and the judge's")]
async fn judge_one(
    setup: &JudgeSetup,
    config: &ProviderConfig,
    ctx: &std::sync::Arc<ModelContext>,
    report_dir: &Path,
    index: JudgeCallIndex,
    campaign: &str,
    recorded: &Recorded,
    evidence: &Evidence,
) -> Result<OneRun, String> {
    let k = setup.declared.calls();
    let floor = setup.declared.floor();
    let request = elengtis_core::prove::judge::request(&setup.declared.rubric, evidence);
    let body = config.body(&request);
    let mut values = Values::default();
    values.runner.insert("canary".into(), json!(evidence.canary));
    values.runner.insert("attempt_id".into(), json!(evidence.attempt_id));
    let mut calls = Vec::new();
    let mut records = Vec::new();
    let (mut input_total, mut output_total) = (0u64, 0u64);
    for j in 0..k {
        // Each re-judgment is its own fixture (`sample`), in a fixed order: a judge that
        // flips between identical requests replays exactly as recorded.
        let sample = index.0.saturating_mul(k).saturating_add(j);
        let mut provider = Provider::new(config.clone(), &values, sample, ctx.clone());
        let at = Instant::now();
        let result = provider.respond(&request).await;
        let latency_ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        let exchanges: Vec<Value> = provider.take_exchanges().iter().map(crate::model::exchange_summary).collect();
        let (raw, read, input_tokens, output_tokens) = match result {
            Ok(turn) => {
                let read = match turn.finish_reason.as_deref() {
                    Some("refusal" | "content_filter")
                        if elengtis_core::prove::consensus::parse_answer(&turn.content).is_err() =>
                    {
                        JudgeCall::Failed { why: format!("the judge refused: {}", short(&turn.content)) }
                    }
                    _ => JudgeCall::read(&turn.content, floor),
                };
                (Some(turn.content), read, turn.usage.input_tokens, turn.usage.output_tokens)
            }
            Err(e) => (None, JudgeCall::Failed { why: short(&e.detail) }, 0, 0),
        };
        input_total += input_tokens;
        output_total += output_tokens;
        records.push(CallRecord {
            n: j + 1,
            raw,
            read: read.clone(),
            latency_ms,
            input_tokens,
            output_tokens,
            exchanges,
        });
        calls.push(read);
    }
    let decided = consensus(&calls);
    let file = format!("{campaign}/{DIR}/{}.json", recorded.row.trial_id);
    let document = json!({
        "format": "elengtis-judge",
        "trial_id": recorded.row.trial_id,
        "attempt_id": recorded.row.attempt_id,
        "evidence": format!("{campaign}/results/{}", recorded.row.evidence),
        "rubric": setup.declared.rubric,
        "rubric_sha256": setup.rubric_sha256(),
        "model": setup.model_label(),
        "k": k,
        "confidence_floor": floor,
        "request": body,
        "calls": records,
        "consensus": decided,
    });
    let path = report_dir.join(&file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("failed to create {}: {e}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(&document).unwrap_or_default() + "\n";
    crate::results::store::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
    Ok(OneRun {
        key: (campaign.to_owned(), recorded.row.trial_id.clone()),
        consensus: decided,
        file,
        calls: k,
        input_tokens: input_total,
        output_tokens: output_total,
    })
}

fn short(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() { format!("{cut}…") } else { cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guarded_target_of_a_finding_is_the_guarded_side() {
        for target in ["guarded", "guarded-paraphrase", "guarded-homoglyph"] {
            assert_eq!(side_of(target), Side::Guarded, "{target}");
        }
        for target in ["vulnerable", "vulnerable-paraphrase", "carrier"] {
            assert_eq!(side_of(target), Side::Vulnerable, "{target}");
        }
    }
}
