//! The comparison as Markdown (and as the plain table the CLI prints).

use crate::cost::figure_ci;
use crate::decide;
use crate::stats::pct;
use crate::verdict::{group_text, ranking, verdicts};
use crate::{CellSummary, Comparison};
use locksim_sim::Property;
use std::fmt::Write;

/// A property's share for a table: `n/a` where the configuration cannot show it.
pub fn property_text(cell: &CellSummary, p: Property) -> String {
    cell.property(p).map_or("n/a".into(), |s| s.text())
}

/// Latent breaks of fencing for a table: `n/a` where no write carried a token.
pub fn latent_text(cell: &CellSummary) -> String {
    match cell.property(Property::Fencing) {
        None => "n/a".into(),
        Some(_) => cell.latent.text(),
    }
}

/// The zombie window of a cell for a table: the longest over its runs and the median of each
/// run's longest, in ms, with the runs that had one (`max 686 · p50 355 ms (12 runs)`); `n/a`
/// when no holder went on after the service let another client take its lock.
pub fn zombie_text(cell: &CellSummary) -> String {
    if cell.zombie_runs == 0 {
        return "n/a".into();
    }
    let runs = if cell.zombie_runs == 1 { "run" } else { "runs" };
    format!(
        "max {:.0} · p50 {:.0} ms ({} {runs})",
        cell.zombie_window_ms_max, cell.zombie_window_ms_p50, cell.zombie_runs
    )
}

/// The legend under the headline table.
pub const HEADLINE_LEGEND: &str = "Each share is of the cell's runs (seeds), with its 95% Wilson \
    interval; damage: an acknowledged update lost or a stale write accepted; latent: fencing's \
    guarantee broken (a token reused) with no damage in that run; overlap: two clients inside \
    at once; n/a: no write carried a token.";

/// The headline: one row per protocol, one column per profile; each cell the share of runs
/// with damage, then latent breaks, then overlap.
pub fn table(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = write!(s, "| protocol |");
    for (p, _) in &c.profiles {
        let _ = write!(s, " {} |", crate::decide::display_profile(p));
    }
    let _ = write!(s, "\n|---|");
    for _ in &c.profiles {
        let _ = write!(s, "---|");
    }
    s.push('\n');
    for (proto, _) in &c.protocols {
        let _ = write!(s, "| {proto} |");
        for (profile, _) in &c.profiles {
            match c.cell(proto, profile) {
                Some(cell) if !cell.ran() => {
                    let _ = write!(s, " {} |", same_as_text(cell));
                }
                Some(cell) => {
                    let _ = write!(
                        s,
                        " damage {} · latent {} · overlap {} |",
                        cell.damage.text(),
                        latent_text(cell),
                        cell.overlap.text()
                    );
                }
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The verdict lines: one per protocol, its sentence then the evidence.
pub fn verdict_lines(c: &Comparison) -> String {
    let mut s = String::new();
    for v in verdicts(c) {
        let _ = writeln!(
            s,
            "- **{}**: {}. *Evidence*: {}.",
            v.protocol,
            v.sentence(),
            v.evidence()
        );
    }
    s
}

/// The bottom line: per common need, the rows that fit it (derived from the decision
/// table below it), one line each.
pub fn bottom_line(c: &Comparison) -> String {
    let mut s = String::new();
    for (need, answer) in decide::bottom_line(c) {
        let _ = writeln!(s, "- **{need}**: {answer}.");
    }
    s
}

/// The terminal's summary, at most 80 columns: the bottom line, the decision table turned
/// (a line per row, a column per requirement, in a word), and what the words mean.
pub fn summary_text(c: &Comparison) -> String {
    let mut s = String::from("Bottom line:\n");
    for (need, answer) in decide::bottom_line_brief(c, 3) {
        s += &wrap(&format!("- {need}: {answer}."), 80, "  ");
    }
    let rows = decide::of(c);
    if rows.is_empty() {
        return s;
    }
    let width = c
        .protocols
        .iter()
        .map(|(p, _)| decide::display_row(c, p).chars().count())
        .max()
        .unwrap_or(0)
        .min(38);
    let _ = write!(s, "\nWhat to choose (✘ breaks, ◐ can break rarely, ✔ no break found, ? undecided or\nnot exercised):\n{:width$}", "");
    for r in &rows {
        let _ = write!(s, " {:>6}", r.short);
    }
    s.push('\n');
    for (i, (p, _)) in c.protocols.iter().enumerate() {
        let label: String = decide::display_row(c, p).chars().take(width).collect();
        let _ = write!(s, "{label:width$}");
        for r in &rows {
            let mark = r.decisions[i].grade.map_or("", |g| g.mark());
            let _ = write!(s, " {mark:>6}");
        }
        s.push('\n');
    }
    for r in &rows {
        s += &wrap(
            &format!("{}: {} ({})", r.short, r.requirement, r.reads),
            80,
            "  ",
        );
    }
    s
}

/// `text` wrapped at `width` columns, lines after the first indented by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out += &line;
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line += word;
    }
    out += &line;
    out.push('\n');
    out
}

/// The decision table: requirements × rows (in groups of at most `decide::MAX_COLUMNS`
/// rows, a protocol's rows together), its definitions under it, then each answer's
/// evidence and replay command.
pub fn decision_table(c: &Comparison) -> String {
    let rows = decide::of(c);
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    let labels: Vec<&str> = c.protocols.iter().map(|(p, _)| p.as_str()).collect();
    for (i, group) in decide::column_groups(&labels, decide::MAX_COLUMNS)
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            s.push('\n');
        }
        let shown: Vec<String> = labels[group.clone()]
            .iter()
            .map(|l| decide::display_row(c, l))
            .collect();
        let _ = writeln!(s, "| requirement | {} |", shown.join(" | "));
        let _ = writeln!(s, "|---|{}", "---|".repeat(group.len()));
        for r in &rows {
            let cells: Vec<String> = r.decisions[group.clone()]
                .iter()
                .map(|d| d.word())
                .collect();
            let _ = writeln!(s, "| {} | {} |", r.requirement, cells.join(" | "));
        }
    }
    let _ = writeln!(s, "\n{}\n\nEvidence:\n", decide::legend(c));
    for r in &rows {
        let _ = writeln!(s, "- *{}* ({}):", r.requirement, r.reads);
        for d in &r.decisions {
            let _ = writeln!(s, "  - {}: {} — {}", d.row, d.word(), d.evidence);
        }
    }
    s
}

/// The legend under the cost table.
pub const COST_LEGEND: &str = "Simulated under the matrix's network. Uncontended: one client, \
    no faults, mean over the runs of each run's p50 / p99 from acquire to grant; messages (the \
    lock's own, heartbeats included, the resource's excluded) and server fsyncs per grant in \
    those runs; handoffs: grants per second with the row's clients contending, no faults; \
    stuck: ms per second someone wanted the lock while nobody held it, under the named profile; \
    ±: half the 95% interval of the mean over the runs (Student's t; the spread between runs, \
    not a bound on any one run); messages and fsyncs are pooled over the runs.";

/// The legend of the live column (shown when `compare --validation` gave live figures).
pub const LIVE_COST_LEGEND: &str = "Loopback live · sim: the acquire latency's median against \
    the real servers on loopback (`locksim validate`'s live runs of the protocol's healthy \
    validation scenario, named; median of the runs' medians) beside the simulator's on the \
    same scenario; both contended, unlike the uncontended columns; – where the validation has \
    no live result for the protocol. Where the live runs counted the servers' fsyncs, their \
    fsyncs per grant follow, live · sim, on the same runs.";

/// Whether any row has a live latency (the cost tables then show its column).
pub fn has_live_cost(c: &Comparison) -> bool {
    c.rows
        .iter()
        .any(|r| r.cost.as_ref().is_some_and(|x| x.live.is_some()))
}

/// A row's live latency cell: `live · sim (scenario)`, then the fsyncs per grant where the
/// servers counted them (`; fsyncs/grant live · sim`), or `–`.
pub fn live_cell(x: &crate::cost::Cost) -> String {
    x.live.as_ref().map_or("–".into(), |l| {
        let fsyncs = match (l.fsyncs_per_grant, l.sim_fsyncs_per_grant) {
            (Some(live), Some(sim)) => format!("; fsyncs/grant {live:.1} · {sim:.1}"),
            _ => String::new(),
        };
        format!(
            "{:.1} · {:.1} ({}){fsyncs}",
            l.acquire_ms_p50, l.sim_acquire_ms_p50, l.scenario
        )
    })
}

/// The cost table: one row per protocol row.
pub fn cost_table(c: &Comparison) -> String {
    let live = has_live_cost(c);
    let mut s = String::from(
        "| protocol | acquire p50 (ms) | acquire p99 (ms) | handoffs/s | messages/acquire | fsyncs/acquire | stuck (ms/s) | uncontended runs |",
    );
    s += if live {
        " loopback live · sim p50 (ms) |\n|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|---|\n"
    };
    for r in &c.rows {
        let Some(x) = &r.cost else { continue };
        let stuck = figure_ci(x.stuck_ms_per_s, x.stuck_ms_per_s_ci95, 0);
        let tail = if live {
            format!(" {} |", live_cell(x))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {:.2} | {} ({}) | {} |{tail}",
            r.label,
            figure_ci(Some(x.acquire_ms_p50), x.acquire_ms_p50_ci95, 1),
            figure_ci(Some(x.acquire_ms_p99), x.acquire_ms_p99_ci95, 1),
            figure_ci(x.handoffs_per_s, x.handoffs_per_s_ci95, 1),
            x.messages_per_acquire,
            x.fsyncs_per_acquire,
            stuck,
            x.stuck_profile,
            x.runs
        );
    }
    s
}

/// What the report's words mean.
pub const DEFINITIONS: &str = "**Damage**: an acknowledged update was lost or the resource \
    accepted a stale write: data suffered. **Latent**: fencing's guarantee broke (a token \
    reused by two grants) but no data suffered in that run; it becomes damage when the two \
    grants overlap. **Overlap**: two clients in the critical section at once (mutual exclusion \
    violated); fencing and compare-and-set exist to keep overlap from becoming damage. **Harm** \
    (in the JSON and per property): damage or latent. `n/a`: the configuration cannot show it \
    (no fencing token was ever written).";

fn header(s: &mut String, c: &Comparison) {
    let _ = writeln!(
        s,
        "{} runs in the matrix ({} per cell; {}), {} in all with the phase diagrams and the \
         catalog. Produced by `{}`; every figure below comes from these runs, every share has \
         its 95% Wilson interval, and every failing seed replays exactly.\n",
        c.runs(),
        c.seed_counts(),
        c.seeds,
        c.runs_all(),
        c.command
    );
    let _ = writeln!(s, "{DEFINITIONS}\n");
}

fn details(s: &mut String, c: &Comparison) {
    let _ = writeln!(
        s,
        "| protocol | profile | seeds | damage | latent | zombie window | mutual exclusion | fencing | lost update | acked updates lost | writes rejected | unknown | errors |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for cell in &c.cells {
        if !cell.ran() {
            let dashes = " – |".repeat(10);
            let (p, f) = (&cell.protocol, &cell.profile);
            let _ = writeln!(s, "| {p} | {f} | {} |{dashes}", same_as_text(cell));
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell.protocol,
            cell.profile,
            cell.seeds,
            cell.damage.text(),
            latent_text(cell),
            zombie_text(cell),
            property_text(cell, Property::MutualExclusion),
            property_text(cell, Property::Fencing),
            property_text(cell, Property::LostUpdate),
            lost_text(cell),
            rejected_text(cell),
            cell.runs_unknown,
            cell.runs_error
        );
    }
    let _ = writeln!(s, "\n{DETAILS_LEGEND}");
    let not_run = not_run(c);
    if !not_run.is_empty() {
        let _ = writeln!(s, "\n{NOT_RUN_LEGEND}\n");
        for (row, same_as, why, profiles) in not_run {
            let _ = writeln!(
                s,
                "- {row} under {}: same as {same_as}. {why}",
                profiles.join(", ")
            );
        }
    }
}

/// A cell that was not run, for a table: `same as ROW`.
pub fn same_as_text(cell: &CellSummary) -> String {
    format!("same as {}", cell.same_as.as_deref().unwrap_or("?"))
}

/// The legend above the list of cells not run.
pub const NOT_RUN_LEGEND: &str = "Cells not run: under these profiles the row's runs are the \
    named row's, seed for seed (nothing in the row's difference can act without the faults it \
    needs); the tables show `same as ROW`, report.json repeats that row's figures with \
    `same_as` and `same_as_why` set, and `tests/compare.rs` runs both rows to check it.";

/// The cells not run, grouped: (row, the row whose runs they share, why, profiles).
pub fn not_run(c: &Comparison) -> Vec<(String, String, String, Vec<String>)> {
    let mut groups: Vec<(String, String, String, Vec<String>)> = vec![];
    for cell in c.cells.iter().filter(|x| !x.ran()) {
        let same = cell.same_as.clone().unwrap_or_default();
        let key = (&cell.protocol, &same, &cell.same_as_why);
        match groups.iter_mut().find(|g| (&g.0, &g.1, &g.2) == key) {
            Some(g) => g.3.push(cell.profile.clone()),
            None => groups.push((
                cell.protocol.clone(),
                same,
                cell.same_as_why.clone(),
                vec![cell.profile.clone()],
            )),
        }
    }
    groups
}

/// The legend under the per-property table.
pub const DETAILS_LEGEND: &str = "Shares of the cell's runs violating each property (95% \
    intervals); zombie window: how long a holder went on as the holder after the service let \
    another client take its lock, until it learned it had lost it (a failed extension, a \
    lost-lock signal, its own validity check) or, if it never learned, its last write: the \
    longest over the cell's runs, the median of each run's longest, and the runs that had one \
    (n/a: no run had one); acked updates lost and writes rejected are totals over all its runs (a ratio, \
    no interval: the writes of one run are not independent).";

/// Acknowledged updates lost: `12 of 4,000 (0.3%)`.
pub fn lost_text(cell: &CellSummary) -> String {
    match cell.lost_share() {
        Some(r) => format!(
            "{} of {} ({})",
            cell.updates_lost,
            cell.updates_acked,
            pct(r)
        ),
        None => "n/a".into(),
    }
}

/// Writes rejected: `30 of 4,000 (0.7%)`.
pub fn rejected_text(cell: &CellSummary) -> String {
    match cell.rejected_share() {
        Some(r) => format!(
            "{} of {} ({})",
            cell.writes_rejected,
            cell.writes_rejected + cell.writes_accepted,
            pct(r)
        ),
        None => "–".into(),
    }
}

/// The legend under the phase diagrams.
pub const PHASE_LEGEND: &str = "Shares of the point's runs (95% intervals) against the fault's \
    size as a multiple of the row's TTL.";

fn phase(s: &mut String, c: &Comparison) {
    for series in &c.phase {
        let _ = writeln!(
            s,
            "\n### {} — {} (TTL {} ms)\n\n| × TTL | size (ms) | seeds | damage | latent | overlap |\n|---|---|---|---|---|---|",
            series.protocol, series.about, series.ttl_ms
        );
        for p in &series.points {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                p.ttl_multiple,
                p.size_ms,
                p.seeds,
                p.damage.text(),
                p.latent.text(),
                p.overlap.text()
            );
        }
    }
    let _ = writeln!(s, "\n{PHASE_LEGEND}");
    if !c.phase_left_out.is_empty() {
        let _ = writeln!(s, "\nRows without a diagram on an axis:\n");
        for (row, axes, why) in &c.phase_left_out {
            let _ = writeln!(s, "- {row} ({}): {why}", axes.join(", "));
        }
    }
}

/// The outcome of a catalog file per property, next to what it expects.
pub fn catalog_outcome(e: &crate::CatalogEntry, p: Property) -> (String, String) {
    let expect = e
        .expect
        .get(p.name())
        .cloned()
        .unwrap_or_else(|| "–".into());
    let seen = match e.outcome.property(p) {
        None => "n/a".into(),
        Some(sh) => format!("{}/{}", sh.k, sh.n),
    };
    (expect, seen)
}

/// Whether what a catalog file expects of a property is what its runs showed: `holds` and
/// no run violating it, `violated` and every run violating it, `not_applicable` and no run
/// able to show it.
pub fn catalog_agrees(e: &crate::CatalogEntry, p: Property) -> bool {
    match (
        e.expect.get(p.name()).map(String::as_str),
        e.outcome.property(p),
    ) {
        (None, _) => true,
        (Some("holds"), Some(s)) => s.k == 0,
        (Some("violated"), Some(s)) => s.k == s.n && s.n > 0,
        (Some("not_applicable"), None) => true,
        _ => false,
    }
}

fn catalog(s: &mut String, c: &Comparison) {
    let _ = writeln!(
        s,
        "Per property: what the file expects → runs violating it.\n\n| scenario | protocol | seeds | mutual exclusion | fencing | lost update | expect met |\n|---|---|---|---|---|---|---|"
    );
    for e in &c.catalog {
        let cols: Vec<String> = Property::ALL
            .iter()
            .map(|p| {
                let (x, seen) = catalog_outcome(e, *p);
                format!("{x} → {seen}")
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {}/{} |",
            e.name,
            e.protocol,
            e.outcome.seeds,
            cols.join(" | "),
            e.expect_met.k,
            e.expect_met.n
        );
    }
    let _ = writeln!(s, "\n{CATALOG_LEGEND}");
}

/// The legend under the catalog table.
pub const CATALOG_LEGEND: &str = "Per property: what the story's file expects → runs violating \
    it, of the story's seeds (n/a: the property cannot be shown); expect met: runs meeting \
    every expectation.";

/// The legend under the ranking.
pub const RANKING_LEGEND: &str = "Ranked by the share of runs with damage; rows with the same \
    rank are not ranked apart (their 95% intervals overlap, directly or through others); a \
    better rank's intervals all lie below a worse one's.";

/// The report's top: the decision table, the verdict, the cost, the headline table and the
/// ranking.
fn answers(s: &mut String, c: &Comparison) {
    let decisions = decision_table(c);
    if !decisions.is_empty() {
        let _ = writeln!(s, "## What to choose\n\n{decisions}");
    }
    let _ = writeln!(s, "## Verdict\n");
    s.push_str(&verdict_lines(c));
    if c.rows.iter().any(|r| r.cost.is_some()) {
        let _ = writeln!(s, "\n## Cost\n\n{}\n{COST_LEGEND}", cost_table(c));
        if has_live_cost(c) {
            let _ = writeln!(s, "{LIVE_COST_LEGEND}");
        }
    }
    let _ = writeln!(
        s,
        "\n## Damage, latent and overlap: share of runs (95% interval)\n"
    );
    s.push_str(&table(c));
    let _ = writeln!(s, "\n{HEADLINE_LEGEND}");
    let _ = writeln!(s, "\n## Ranking by damage\n\n{RANKING_LEGEND}\n");
    for (profile, groups) in ranking(c) {
        let g: Vec<String> = groups.iter().map(|(r, n)| group_text(*r, n)).collect();
        let _ = writeln!(s, "- {profile}: {}", g.join(" · "));
    }
}

/// The whole report.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", c.title);
    let bottom = bottom_line(c);
    if !bottom.is_empty() {
        // First, before anything else: the measured answer per common need.
        let _ = writeln!(
            s,
            "## Bottom line\n\n{bottom}\nDerived from the decision table \
            (What to choose) below; each row's figure is the share of runs that broke, its 95% \
            upper bound.\n"
        );
    }
    header(&mut s, c);
    answers(&mut s, c);
    let _ = writeln!(s, "\n## Each property\n");
    details(&mut s, c);
    if !c.phase.is_empty() {
        let _ = writeln!(s, "\n## Phase diagrams");
        phase(&mut s, c);
    }
    if !c.catalog.is_empty() {
        let _ = writeln!(s, "\n## The catalog\n");
        catalog(&mut s, c);
    }
    let _ = writeln!(s, "\n## Protocols\n");
    for (p, d) in &c.protocols {
        let _ = writeln!(s, "- **{p}**: {d}");
    }
    let _ = writeln!(s, "\n## Fault profiles\n");
    for (p, d) in &c.profiles {
        let _ = writeln!(s, "- **{p}**: {d}");
    }
    liveness(&mut s, c);
    failing(&mut s, c);
    s
}

fn liveness(s: &mut String, c: &Comparison) {
    let _ = writeln!(s, "\n## Liveness\n");
    let _ = writeln!(
        s,
        "| protocol | profile | runs | acquisitions/run | acquire p50 (ms, mean) | longest wait with the lock free (ms) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for cell in &c.cells {
        if !cell.ran() {
            let (p, f) = (&cell.protocol, &cell.profile);
            let _ = writeln!(s, "| {p} | {f} | {} | – | – | – |", same_as_text(cell));
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.0} |",
            cell.protocol,
            cell.profile,
            cell.runs,
            cell.acquisitions_mean,
            cell.acquire_latency_ms_p50_mean,
            cell.wanted_free_ms_max,
        );
    }
    let _ = writeln!(s, "\n{LIVENESS_LEGEND}");
}

/// The legend under the liveness table.
pub const LIVENESS_LEGEND: &str = "Per cell, under contention and faults: grants per run and the \
    mean of each run's median acquire latency (a queueing figure, not the lock's price: see the \
    cost table), and the longest stretch someone waited while nobody held the lock.";

fn failing(s: &mut String, c: &Comparison) {
    let failing: Vec<_> = c.cells.iter().filter(|c| !c.failing.is_empty()).collect();
    if !failing.is_empty() {
        let _ = writeln!(
            s,
            "\n## Failing seeds (first {} per cell)\n",
            crate::FAILING_SEEDS_KEPT
        );
        for cell in failing {
            let _ = writeln!(s, "- {} under {}:", cell.protocol, cell.profile);
            for f in &cell.failing {
                let _ = writeln!(
                    s,
                    "  - seed {} ({}): `{}`",
                    f.seed,
                    f.kinds.join(", "),
                    f.replay
                );
            }
        }
    }
    undecided(s, c);
    if !c.counterexamples.is_empty() {
        let _ = writeln!(s, "\n## Counterexamples\n");
        for x in &c.counterexamples {
            let _ = writeln!(
                s,
                "- **{} under {}**, seed {} — {}: {}\n  replay: `{}` (trace {})",
                x.protocol, x.profile, x.seed, x.kind, x.caption, x.replay, x.trace_hash
            );
        }
        let _ = writeln!(s, "\nTimelines of these are in `report.html`.");
    }
}

/// Runs the checker could not decide, with its reasons: an `unknown` is a finding too.
fn undecided(s: &mut String, c: &Comparison) {
    let cells: Vec<_> = c.cells.iter().filter(|c| !c.undecided.is_empty()).collect();
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Undecided runs (verdict unknown; first {} per cell)\n",
        crate::FAILING_SEEDS_KEPT
    );
    for cell in cells {
        let _ = writeln!(s, "- {} under {}:", cell.protocol, cell.profile);
        for u in &cell.undecided {
            let why: Vec<String> = u.reasons.iter().map(|(p, r)| format!("{p}: {r}")).collect();
            let _ = writeln!(
                s,
                "  - seed {} ({}): `{}`",
                u.seed,
                why.join("; "),
                u.replay
            );
        }
    }
}
