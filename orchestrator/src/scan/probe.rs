//! Where an effect lands in a SQLite database (docs/scan.md, "A database sink"): one probe
//! trial per attack tool whose effect a snapshot of `--database` would show. The trial makes
//! the call for real in its trusted setup (with the attacker's marker), then a
//! `container_sqlite_query` of the snapshot lists every table and column
//! (`sqlite_master` joined with `pragma_table_info`). The candidate's check then searches those
//! columns for the marker; its calibration shows whether the effect is really there and
//! nowhere without it.

use std::path::Path;

use serde_json::{Value, json};

/// A table and one of its columns.
pub type Place = (String, String);

/// The query that lists every table's columns (internal `sqlite_` tables left out).
pub const SCHEMA_QUERY: &str = "SELECT m.name AS t, p.name AS c FROM sqlite_master AS m JOIN pragma_table_info(m.name) \
                                AS p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid";

/// `name` as an SQL identifier (double quotes, inner ones doubled).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The check's query: whether any of `places` holds text like `?1`, as `hit` (0 or 1).
pub fn marker_query(places: &[Place]) -> String {
    let terms: Vec<String> = places
        .iter()
        .map(|(t, c)| format!("(SELECT count(*) FROM {} WHERE CAST({} AS TEXT) LIKE ?1)", quoted(t), quoted(c)))
        .collect();
    format!("SELECT ({}) > 0 AS hit", terms.join(" + "))
}

/// The probe's campaign and scenario documents for `tool` called with `arguments`, the
/// snapshot of `database` listing the schema; `target` is the scan's target.
pub fn documents(target: &Value, tool: &str, arguments: &Value, database: &str, marker: &str) -> (Value, Value) {
    let mut target = target.clone();
    target["id"] = json!("probe");
    target["bindings"] = json!({"probe": {}});
    let campaign = json!({
        "schema_version": 2,
        "trials": 1,
        "step_budget": 2,
        "engine": "reference",
        "targets": [target],
        "scenarios": ["probe.yaml"],
        "script": {"steps": [{"content": "Nothing to do."}]},
    });
    let scenario = json!({
        "schema_version": 1,
        "id": "probe",
        "title": format!("Where {tool}'s effect lands in {database}"),
        "description": "A probe of `elengtis scan`: the call made for real in setup, then the database's schema read from a snapshot.",
        "bindings": [],
        "setup": [{"type": "mcp_tool", "id": "effect", "tool": tool, "arguments": arguments}],
        "exercise": {"system": "Probe.", "user": "Probe.", "tools": "all"},
        "proposal_rules": [{"id": "never", "tool": tool,
                            "predicates": [{"path": "/elengtis-probe-never", "op": "equals", "value": marker}],
                            "examples": {"positive": [{"name": tool, "arguments": {"elengtis-probe-never": marker}}],
                                         "negative": [{"name": tool, "arguments": {}}]}}],
        "verify": {"mode": "all", "checks": [{"id": "schema",
            "action": {"type": "container_sqlite_query", "id": "schema", "path": database, "query": SCHEMA_QUERY},
            "assertions": [{"path": "/rows/0/t", "op": "matches", "value": "."}]}]},
    });
    (campaign, scenario)
}

/// The places the probe's results directory `results` recorded (the rows of its schema
/// check), or why there are none.
///
/// # Errors
///
/// Why the probe gave no schema: the trial or its check did not run, or the rows are not
/// `{t, c}` pairs.
pub fn places_in(results: &Path) -> Result<Vec<Place>, String> {
    let runs = crate::prove::legs::read_run(results)?;
    let recorded = runs.get("probe").and_then(|r| r.first()).ok_or("the probe recorded no trial")?;
    let evidence = recorded.evidence.as_ref().map_err(|e| format!("the probe's evidence could not be read: {e}"))?;
    let verification = evidence.verification.as_ref().ok_or_else(|| {
        let errors: Vec<&str> = evidence.errors.iter().map(|e| e.detail.as_str()).collect();
        format!("the probe's trial ended before its check ran: {}", errors.join("; "))
    })?;
    let check = verification.checks.first().ok_or("the probe's check did not run")?;
    let rows = find_rows(&check.action).ok_or_else(|| {
        let error = check.action.get("error").map(Value::to_string).unwrap_or_else(|| check.action.to_string());
        format!("the snapshot's schema query gave no rows: {error}")
    })?;
    let mut places = Vec::new();
    for row in rows {
        match (row.get("t").and_then(Value::as_str), row.get("c").and_then(Value::as_str)) {
            (Some(t), Some(c)) => places.push((t.to_owned(), c.to_owned())),
            _ => return Err(format!("the schema query answered a row that is not a table and a column: {row}")),
        }
    }
    if places.is_empty() {
        return Err("the database has no table after the call".into());
    }
    Ok(places)
}

/// The `rows` array anywhere in an action's record (its output's shape is the verifier's).
fn find_rows(value: &Value) -> Option<&Vec<Value>> {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(rows)) = map.get("rows") {
                return Some(rows);
            }
            map.values().find_map(find_rows)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_query_searches_every_place_and_quotes_names() {
        let q = marker_query(&[("sent".into(), "to".into()), ("we\"ird".into(), "body".into())]);
        assert_eq!(
            q,
            "SELECT ((SELECT count(*) FROM \"sent\" WHERE CAST(\"to\" AS TEXT) LIKE ?1) + (SELECT count(*) FROM \
             \"we\"\"ird\" WHERE CAST(\"body\" AS TEXT) LIKE ?1)) > 0 AS hit"
        );
        assert!(elengtis_verifiers::sqlite::check_query(&q, 1).is_ok());
        assert!(elengtis_verifiers::sqlite::check_query(SCHEMA_QUERY, 0).is_ok());
    }
}
