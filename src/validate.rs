//! The validation table: each scenario of a validation set run live and in the simulator,
//! one row per (scenario, property) with both shares of violating runs and their Wilson 95%
//! intervals, liveness figures side by side, and a verdict: `agrees` when the intervals
//! overlap, else the explanation the scenario file gives (`[validation] explanation`).
//!
//! Results are records, one JSON line each in `validation.jsonl` as they come; the tables
//! (`validation.md`, `.json`, `.html`) are always rewritten from all records so far, so an
//! interrupted run leaves a consistent table and `--resume` runs only what is missing.

use locksim_check::{Property, Verdict};
use locksim_reports::stats::Share;
use locksim_scenarios::RunResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a run ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Against real servers on loopback (`locksim live`).
    Live,
    /// In the simulator.
    Sim,
}

/// One run's result, as kept in `validation.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The scenario's name.
    pub scenario: String,
    /// Live or simulated.
    pub mode: Mode,
    /// The seed.
    pub seed: u64,
    /// Each property's verdict.
    pub properties: BTreeMap<Property, Verdict>,
    /// Grants in the run.
    pub acquisitions: u64,
    /// The run's median acquire latency, in ms.
    pub acquire_p50_ms: f64,
    /// Why the run produced no result (a server that did not start, a refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// The record of a completed run.
    pub fn of(mode: Mode, seed: u64, r: &RunResult) -> Record {
        Record {
            scenario: r.scenario.clone(),
            mode,
            seed,
            properties: r.properties.clone(),
            acquisitions: r.stats.liveness.acquisitions,
            acquire_p50_ms: r.stats.liveness.acquire_latency_ms_p50,
            error: None,
        }
    }

    /// The record of a run that failed.
    pub fn failed(scenario: &str, mode: Mode, seed: u64, error: String) -> Record {
        Record {
            scenario: scenario.into(),
            mode,
            seed,
            properties: BTreeMap::new(),
            acquisitions: 0,
            acquire_p50_ms: 0.0,
            error: Some(error),
        }
    }
}

/// A scenario of the set, as the table needs it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its protocol.
    pub protocol: String,
    /// Per property, why live and simulated shares may disagree.
    pub explanation: BTreeMap<String, String>,
}

/// One side's figures of a row.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Runs that violated the property, of the runs that could decide it.
    #[serde(flatten)]
    pub share: Share,
    /// Runs with a result (the property may be n/a or unknown in some).
    pub runs: u64,
    /// Runs that failed to produce a result.
    pub failed: u64,
    /// Mean grants per run.
    pub acquisitions_per_run: f64,
    /// Median over runs of each run's median acquire latency, in ms.
    pub acquire_p50_ms: f64,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The scenario.
    pub scenario: String,
    /// Its protocol.
    pub protocol: String,
    /// The property.
    pub property: String,
    /// The live runs.
    pub live: Side,
    /// The simulated runs.
    pub sim: Side,
    /// Both sides have results (else the row validates nothing: a live run that failed).
    pub validated: bool,
    /// Both sides have results and their 95% intervals overlap.
    pub agrees: bool,
    /// The scenario file's explanation of a disagreement, if it has one.
    pub explanation: Option<String>,
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// One side of a row from the records of one scenario and mode.
fn side(records: &[&Record], property: Property) -> Side {
    let done: Vec<&Record> = (records.iter().copied())
        .filter(|r| r.error.is_none())
        .collect();
    let n = (done.iter())
        .filter(|r| {
            matches!(
                r.properties.get(&property),
                Some(Verdict::Valid | Verdict::Invalid)
            )
        })
        .count() as u64;
    let k = (done.iter())
        .filter(|r| r.properties.get(&property) == Some(&Verdict::Invalid))
        .count() as u64;
    let runs = done.len() as u64;
    let acquisitions: u64 = done.iter().map(|r| r.acquisitions).sum();
    let latencies = (done.iter())
        .filter(|r| r.acquisitions > 0)
        .map(|r| r.acquire_p50_ms)
        .collect();
    Side {
        share: Share::of(k, n),
        runs,
        failed: records.len() as u64 - runs,
        acquisitions_per_run: if runs == 0 {
            0.0
        } else {
            acquisitions as f64 / runs as f64
        },
        acquire_p50_ms: median(latencies),
    }
}

/// The rows of the table, in the set's order and the properties' report order.
pub fn rows(entries: &[Entry], records: &[Record]) -> Vec<Row> {
    let mut out = vec![];
    for e in entries {
        let of = |mode: Mode| -> Vec<&Record> {
            (records.iter())
                .filter(|r| r.scenario == e.name && r.mode == mode)
                .collect()
        };
        let (live_records, sim_records) = (of(Mode::Live), of(Mode::Sim));
        if live_records.is_empty() && sim_records.is_empty() {
            continue;
        }
        for p in Property::ALL {
            let (live, sim) = (side(&live_records, p), side(&sim_records, p));
            let validated = live.runs > 0 && sim.runs > 0;
            let overlap = live.share.lo <= sim.share.hi && sim.share.lo <= live.share.hi;
            let agrees = validated && overlap;
            out.push(Row {
                scenario: e.name.clone(),
                protocol: e.protocol.clone(),
                property: p.name().into(),
                live,
                sim,
                validated,
                agrees,
                explanation: e.explanation.get(p.name()).cloned(),
            });
        }
    }
    out
}

/// The protocols of `all` that no row validates with at least one live result.
pub fn not_validated(all: &[String], rows: &[Row]) -> Vec<String> {
    all.iter()
        .filter(|p| !rows.iter().any(|r| &r.protocol == *p && r.validated))
        .cloned()
        .collect()
}

/// One protocol's validation status from a `validation.json`, in words (for `compare`).
pub fn status(validation: &serde_json::Value, protocol: &str) -> String {
    let rows: Vec<&serde_json::Value> = (validation["rows"].as_array().into_iter().flatten())
        .filter(|r| r["protocol"] == protocol && r["validated"] == true)
        .collect();
    if rows.is_empty() {
        return "not yet validated".into();
    }
    let agree = rows.iter().filter(|r| r["agrees"] == true).count();
    let explained = (rows.iter())
        .filter(|r| r["agrees"] == false && r["explanation"].is_string())
        .count();
    let open = rows.len() - agree - explained;
    let mut scenarios: Vec<&str> = rows.iter().filter_map(|r| r["scenario"].as_str()).collect();
    scenarios.dedup();
    format!(
        "{agree} of {} rows agree, {explained} explained, {open} open ({} scenarios)",
        rows.len(),
        scenarios.len()
    )
}

/// `k/n [lo, hi]` in percent.
fn share_text(s: &Side) -> String {
    if s.runs == 0 {
        return if s.failed > 0 {
            format!("failed ({} runs)", s.failed)
        } else {
            "—".into()
        };
    }
    if s.share.n == 0 {
        return "n/a".into();
    }
    format!(
        "{}/{} [{:.0}, {:.0}]%",
        s.share.k,
        s.share.n,
        s.share.lo * 100.0,
        s.share.hi * 100.0
    )
}

fn verdict_text(r: &Row) -> &'static str {
    match (r.agrees, &r.explanation) {
        _ if !r.validated => "**not validated**",
        (true, _) => "agrees",
        (false, Some(_)) => "disagrees (explained)",
        (false, None) => "**disagrees**",
    }
}

/// The Markdown table and its notes.
pub fn markdown(rows: &[Row], missing: &[String], header: &str) -> String {
    let mut out = format!("# Validation: live against simulated\n\n{header}\n\n");
    out += "Share of runs that violated the property (of the runs that could decide it), 95% \
            Wilson intervals; `agrees` = the intervals overlap. Liveness: grants per run and \
            the median of the runs' median acquire latency.\n\n";
    out += "| scenario | protocol | property | live | simulated | verdict | grants/run live · sim | acquire p50 ms live · sim |\n";
    out += "|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} · {:.1} | {:.1} · {:.1} |\n",
            r.scenario,
            r.protocol,
            r.property,
            share_text(&r.live),
            share_text(&r.sim),
            verdict_text(r),
            r.live.acquisitions_per_run,
            r.sim.acquisitions_per_run,
            r.live.acquire_p50_ms,
            r.sim.acquire_p50_ms
        );
    }
    let open: Vec<&Row> = rows.iter().filter(|r| r.validated && !r.agrees).collect();
    let failed = rows.iter().filter(|r| !r.validated).count();
    out += &format!(
        "\n{} rows, {} disagree, {failed} not validated (a side without results).\n",
        rows.len(),
        open.len()
    );
    for r in open {
        let why = r.explanation.as_deref().unwrap_or("no explanation yet");
        out += &format!("\n- {} / {}: {why}\n", r.scenario, r.property);
    }
    if !missing.is_empty() {
        out += &format!(
            "\nNot yet validated (no live result): {}.\n",
            missing.join(", ")
        );
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A self-contained HTML page with the table.
pub fn html(rows: &[Row], missing: &[String], header: &str) -> String {
    let mut body = String::new();
    for r in rows {
        let class = if r.agrees { "ok" } else { "bad" };
        body += &format!(
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td title=\"{}\">{}</td><td>{:.1} · {:.1}</td><td>{:.1} · {:.1}</td></tr>\n",
            escape(&r.scenario),
            escape(&r.protocol),
            r.property,
            escape(&share_text(&r.live)),
            escape(&share_text(&r.sim)),
            escape(r.explanation.as_deref().unwrap_or("")),
            verdict_text(r).replace("**", ""),
            r.live.acquisitions_per_run,
            r.sim.acquisitions_per_run,
            r.live.acquire_p50_ms,
            r.sim.acquire_p50_ms
        );
    }
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "<p>Not yet validated (no live result): {}.</p>",
            escape(&missing.join(", "))
        )
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>locksim validation</title>\
         <style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}\
         tr.bad{{background:#fdd}}</style></head><body><h1>Validation: live against simulated</h1>\
         <p>{}</p><table><tr><th>scenario</th><th>protocol</th><th>property</th><th>live</th>\
         <th>simulated</th><th>verdict</th><th>grants/run live · sim</th>\
         <th>acquire p50 ms live · sim</th></tr>\n{body}</table>{missing}</body></html>\n",
        escape(header)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(scenario: &str, mode: Mode, seed: u64, violated: bool) -> Record {
        let v = if violated {
            Verdict::Invalid
        } else {
            Verdict::Valid
        };
        Record {
            scenario: scenario.into(),
            mode,
            seed,
            properties: Property::ALL.iter().map(|p| (*p, v)).collect(),
            acquisitions: 10,
            acquire_p50_ms: seed as f64,
            error: None,
        }
    }

    #[test]
    fn rows_overlap_or_not() {
        let entries = vec![Entry {
            name: "s".into(),
            protocol: "etcd".into(),
            explanation: BTreeMap::from([("fencing".into(), "because".into())]),
        }];
        // Live: 0 of 10 violate; simulated: 20 of 20. Far apart.
        let mut records: Vec<Record> = (1..=10)
            .map(|s| record("s", Mode::Live, s, false))
            .collect();
        records.extend((1..=20).map(|s| record("s", Mode::Sim, s, true)));
        records.push(Record::failed("s", Mode::Live, 11, "did not start".into()));
        let rows = rows(&entries, &records);
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| !r.agrees));
        assert_eq!(rows[1].explanation.as_deref(), Some("because"));
        assert_eq!((rows[0].live.share.k, rows[0].live.share.n), (0, 10));
        assert_eq!((rows[0].live.runs, rows[0].live.failed), (10, 1));
        assert_eq!(rows[0].live.acquire_p50_ms, 5.5);
        // One simulated run without a violation less: 19 of 20 still disagrees with 0 of 10;
        // with 3 of 20 violated the intervals overlap.
        let mut close: Vec<Record> = (1..=10)
            .map(|s| record("s", Mode::Live, s, false))
            .collect();
        close.extend((1..=20).map(|s| record("s", Mode::Sim, s, s <= 3)));
        assert!(super::rows(&entries, &close).iter().all(|r| r.agrees));
        let only_failed = vec![
            Record::failed("s", Mode::Live, 1, "no".into()),
            record("s", Mode::Sim, 1, false),
        ];
        let failed_rows = super::rows(&entries, &only_failed);
        assert!(failed_rows.iter().all(|r| !r.validated && !r.agrees));
        assert!(markdown(&failed_rows, &[], "h").contains("**not validated**"));
        let json = serde_json::json!({ "rows": rows });
        assert_eq!(
            status(&json, "etcd"),
            "0 of 3 rows agree, 1 explained, 2 open (1 scenarios)"
        );
        assert_eq!(status(&json, "redlock"), "not yet validated");
        let md = markdown(&rows, &["redlock".into()], "h");
        assert!(md.contains("s / fencing: because") && md.contains("Not yet validated"));
    }
}
