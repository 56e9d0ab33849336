//! Writes a synthetic history as JSON Lines, e.g. to measure `locksim check` on a large
//! one: `cargo run --release -p locksim-check --example synthetic -- simultaneous 100000 >
//! big.jsonl` (ten events per client).

use locksim_check::history::write_jsonl;
use locksim_check::synthetic::{history, Shape};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synthetic sequential|simultaneous CLIENTS";
    let shape = match args.first().map(String::as_str) {
        Some("sequential") => Shape::Sequential,
        Some("simultaneous") => Shape::Simultaneous,
        _ => panic!("{usage}"),
    };
    let clients: u64 = args.get(1).and_then(|n| n.parse().ok()).expect(usage);
    write_jsonl(&history(clients, shape), std::io::stdout().lock()).expect("stdout");
}
