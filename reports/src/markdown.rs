//! The comparison as Markdown (and as the plain table the CLI prints).

use crate::{percent, Comparison};
use locksim_sim::Property;
use std::fmt::Write;

/// The matrix of violation rates: one row per protocol, one column per profile; each cell
/// `ME / fencing / lost update`.
pub fn table(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = write!(s, "| protocol |");
    for (p, _) in &c.profiles {
        let _ = write!(s, " {p} |");
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
                Some(cell) => {
                    let _ = write!(
                        s,
                        " {} / {} / {} |",
                        percent(cell.rate(Property::MutualExclusion)),
                        percent(cell.rate(Property::Fencing)),
                        percent(cell.rate(Property::LostUpdate))
                    );
                }
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The whole report.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", c.title);
    let _ = writeln!(
        s,
        "{} runs: seeds {} for each protocol × fault profile. Produced by `{}`; every \
         figure below comes from these runs, and every failing seed replays exactly.\n",
        c.runs(),
        c.seeds,
        c.command
    );
    let _ = writeln!(
        s,
        "## Share of runs violating mutual exclusion / fencing / lost update\n"
    );
    s.push_str(&table(c));
    let _ = writeln!(s, "\n## Protocols\n");
    for (p, d) in &c.protocols {
        let _ = writeln!(s, "- **{p}**: {d}");
    }
    let _ = writeln!(s, "\n## Fault profiles\n");
    for (p, d) in &c.profiles {
        let _ = writeln!(s, "- **{p}**: {d}");
    }
    let _ = writeln!(s, "\n## Liveness\n");
    let _ = writeln!(
        s,
        "| protocol | profile | runs | acquisitions/run | acquire p50 (ms, mean) | longest wait with the lock free (ms) | unknown | errors |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for cell in &c.cells {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.0} | {} | {} |",
            cell.protocol,
            cell.profile,
            cell.runs,
            cell.acquisitions_mean,
            cell.acquire_latency_ms_p50_mean,
            cell.wanted_free_ms_max,
            cell.runs_unknown,
            cell.runs_error
        );
    }
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
    if !c.counterexamples.is_empty() {
        let _ = writeln!(s, "\n## Counterexamples\n");
        for x in &c.counterexamples {
            let _ = writeln!(
                s,
                "- **{} under {}**, seed {} — {}: {}\n  replay: `{}` (trace {})",
                x.protocol, x.profile, x.seed, x.kind, x.description, x.replay, x.trace_hash
            );
        }
        let _ = writeln!(s, "\nTimelines of these are in `report.html`.");
    }
    s
}
