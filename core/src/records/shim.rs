//! The control shim's record in an attempt's evidence (`shim`): how each tool was classified,
//! what each control decided on each call, and the notes a reader needs (docs/shim.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::format::campaign::{ApprovalPolicy, EnforcementMode};
use crate::format::seed::Weakness;

/// What the control shim at the MCP boundary did in one attempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShimRecord {
    /// The controls applied.
    pub controls: Vec<Weakness>,
    /// The enforcement mode.
    pub enforcement_mode: EnforcementMode,
    /// The approval policy (`approve` mode).
    pub approval_policy: ApprovalPolicy,
    /// Each listed tool's classification and description check (the last listing).
    pub tools: Vec<ShimTool>,
    /// Each call the model made through the shim, in order.
    pub calls: Vec<ShimCall>,
    /// Notes for the reader, e.g. a tool classified fail-closed with a suggested declaration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One tool as the shim classified it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShimTool {
    /// The tool's name.
    pub name: String,
    /// Its results are untrusted content (W2 source).
    pub read: Classified,
    /// It reaches a destination (W3; a W2 sink).
    pub egress: Classified,
    /// It has consequences (W4; a W2 sink).
    pub consequential: Classified,
    /// It destroys (a W2 sink).
    pub destructive: Classified,
    /// SHA-256 (hex) of the raw description as the target listed it.
    pub description_sha256: String,
    /// Whether the description matched its pin (W1); absent when not pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_matches: Option<bool>,
    /// The raw description, when the sanitiser changed what the model was shown (W1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_description: Option<String>,
}

/// One axis of a tool's classification and the step that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Classified {
    /// The answer.
    pub value: bool,
    /// Which step decided.
    pub by: ClassifiedBy,
}

/// The classification step that decided an axis, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClassifiedBy {
    /// A list of the target's `control_shim`.
    Declared,
    /// An MCP annotation (`readOnlyHint`, `destructiveHint`, `openWorldHint`).
    Annotation,
    /// A destination-shaped argument in the input schema (egress only).
    Destination,
    /// Whole-word tokens of the tool's name.
    NameHint,
    /// Nothing decided: guarded.
    FailClosed,
}

/// One call through the shim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShimCall {
    /// The call's position among the calls through the shim (from 0).
    pub index: u32,
    /// The tool called.
    pub tool: String,
    /// What each applicable control decided, in control order.
    pub decisions: Vec<ShimDecision>,
    /// What happened to the call.
    pub action: ShimAction,
    /// The refusal text the model was shown (`refused: …`), when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The session's label after the call: it has read untrusted content.
    pub untrusted: bool,
    /// The session's label after the call: it has read private content.
    pub private: bool,
}

/// One control's decision on one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShimDecision {
    /// The control.
    pub control: Weakness,
    /// Its decision.
    pub decision: ShimVerdict,
    /// Why, in words.
    pub reason: String,
}

/// A control's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShimVerdict {
    /// The call may pass.
    Allow,
    /// The approval policy approved a call the control would refuse.
    Approved,
    /// The call is refused.
    Refuse,
    /// Observe mode: the control would refuse; the call passed and this was recorded.
    WouldRefuse,
}

/// What happened to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShimAction {
    /// Passed to the target.
    Forwarded,
    /// Refused by the shim; the target never saw it.
    Refused,
}
