//! `locksim sweep`: shards merge into the unsharded sweep, the thread count does not change
//! a result, a killed sweep resumes with every seed exactly once, bad input exits 2.

use crate::common;

use common::{code, locksim, repo, run, scratch, stderr, stdout};
use locksim_scenarios::sweep::{read_results, SeedResult};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Random pauses of up to 3 s under a 1 s TTL: some seeds violate mutual exclusion.
const SCENARIO: &str = "scenarios/search/redis-single-pause-search.toml";

fn sweep(seeds: &str, extra: &[&str], out: &Path) -> std::process::Output {
    let scenario = repo(SCENARIO);
    let out = out.display().to_string();
    let mut args = vec![
        "sweep", &scenario, "--seeds", seeds, "--out", &out, "--quiet",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn by_seed(mut results: Vec<SeedResult>) -> Vec<SeedResult> {
    results.sort_by_key(|r| r.seed);
    results
}

#[test]
fn shards_merge_into_the_unsharded_sweep_and_jobs_do_not_matter() {
    let dir = scratch("sweep-shards");
    let whole = dir.join("whole.jsonl");
    let out = sweep("0..60", &["--jobs", "2"], &whole);
    assert_eq!(code(&out), 1, "some seeds violate: {}", stdout(&out));
    let whole = by_seed(read_results(&whole).unwrap());
    let seeds: Vec<u64> = whole.iter().map(|r| r.seed).collect();
    assert_eq!(seeds, (0..60).collect::<Vec<_>>());
    let failing = whole.iter().filter(|r| r.violated()).count();
    assert!(
        (1..60).contains(&failing),
        "{failing} of 60 failed: want a mix"
    );

    let single = dir.join("single.jsonl");
    sweep("0..60", &["--jobs", "1"], &single);
    assert_eq!(
        by_seed(read_results(&single).unwrap()),
        whole,
        "--jobs 1 vs 2"
    );

    let mut merged = vec![];
    for k in 0..3 {
        let shard = dir.join(format!("shard-{k}.jsonl"));
        sweep(
            "0..60",
            &["--shard", &format!("{k}/3"), "--jobs", "1"],
            &shard,
        );
        let part = read_results(&shard).unwrap();
        assert!(part.iter().all(|r| r.seed % 3 == k));
        merged.extend(part);
    }
    assert_eq!(by_seed(merged), whole, "3 shards merged vs unsharded");
}

#[test]
fn a_sweep_line_is_what_a_fresh_process_runs() {
    let dir = scratch("sweep-fresh");
    let file = dir.join("r.jsonl");
    // Seeds 8..16 hold both a failing seed (13) and passing ones.
    sweep("8..16", &["--jobs", "2"], &file);
    let results = read_results(&file).unwrap();
    let failing = results
        .iter()
        .find(|r| r.violated())
        .expect("a failing seed");
    let passing = results
        .iter()
        .find(|r| !r.violated())
        .expect("a passing seed");
    for r in [failing, passing] {
        let seed = r.seed.to_string();
        let out = run(&["run", &repo(SCENARIO), "--seed", &seed, "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["trace_hash"], r.trace_hash.as_str(), "seed {seed}");
        assert_eq!(code(&out), i32::from(r.violated()), "seed {seed}");
    }
}

#[test]
fn an_interrupted_sweep_resumes_with_every_seed_exactly_once() {
    let dir = scratch("sweep-resume");
    let file = dir.join("r.jsonl");
    let mut child = locksim()
        .args(["sweep", &repo(SCENARIO), "--seeds", "0..150", "--jobs", "1"])
        .args(["--quiet", "--out", &file.display().to_string()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lines = || std::fs::read(&file).map_or(0, |b| b.iter().filter(|c| **c == b'\n').count());
    for _ in 0..2_000 {
        if lines() >= 20 {
            break;
        }
        // Real time on purpose: the test watches another process, not a simulation.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = lines();
    assert!((20..150).contains(&before), "killed after {before} lines");
    // A write torn by the kill: half a line with no newline.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(br#"{"seed":149,"scenario":"redis-sin"#)
        .unwrap();
    drop(f);

    let again = sweep("0..150", &["--jobs", "2"], &file);
    assert_eq!(code(&again), 2, "no --resume: {}", stderr(&again));
    assert!(stderr(&again).contains("--resume"), "{}", stderr(&again));

    let resumed = sweep("0..150", &["--jobs", "2", "--resume"], &file);
    assert_eq!(code(&resumed), 1, "{}", stderr(&resumed));
    let text = stdout(&resumed);
    assert!(
        text.contains(&format!(
            "runs       150 ({} now, {before} from earlier)",
            150 - before
        )),
        "{text}"
    );
    let results = by_seed(read_results(&file).unwrap());
    let seeds: Vec<u64> = results.iter().map(|r| r.seed).collect();
    assert_eq!(
        seeds,
        (0..150).collect::<Vec<_>>(),
        "every seed exactly once"
    );

    let reference = dir.join("reference.jsonl");
    sweep("0..150", &["--jobs", "2"], &reference);
    assert_eq!(results, by_seed(read_results(&reference).unwrap()));

    let done = sweep("0..150", &["--resume"], &file);
    assert_eq!(code(&done), 1);
    assert!(
        stdout(&done).contains("(0 now, 150 from earlier)"),
        "{}",
        stdout(&done)
    );
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = scratch("sweep-bad");
    let file = dir.join("r.jsonl");
    for (seeds, extra, says) in [
        ("5..5", &[][..], "empty"),
        ("5", &[][..], "not a seed range"),
        ("0..10", &["--shard", "3/3"][..], "not a shard"),
        ("0..10", &["--jobs", "0"][..], "--jobs"),
    ] {
        let out = sweep(seeds, extra, &file);
        assert_eq!(code(&out), 2, "{seeds} {extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    std::fs::write(&file, "{\"seed\": 1}\n").unwrap();
    let out = sweep("0..10", &["--resume"], &file);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("r.jsonl:1: not a sweep result"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn resume_refuses_the_results_of_an_edited_scenario() {
    let dir = scratch("sweep-edited");
    let scenario = dir.join("s.toml");
    let original = std::fs::read_to_string(repo("scenarios/catalog/redis-single-healthy.toml"))
        .unwrap()
        .replace("duration_ms = 10_000", "duration_ms = 500");
    std::fs::write(&scenario, &original).unwrap();
    let out = dir.join("r.jsonl");
    let sweep_of = |extra: &[&str]| {
        let mut args = vec!["sweep", scenario.to_str().unwrap(), "--seeds", "0..4"];
        args.extend(["--quiet", "--out", out.to_str().unwrap()]);
        args.extend(extra);
        run(&args)
    };
    assert_eq!(code(&sweep_of(&[])), 0);
    // Prose does not change results: resuming is fine.
    std::fs::write(&scenario, original.replace("no faults", "no faults at all")).unwrap();
    assert_eq!(code(&sweep_of(&["--resume"])), 0);
    // A parameter does: resuming would mix two scenarios in one file.
    std::fs::write(
        &scenario,
        original.replace("ttl_ms = 1_000", "ttl_ms = 1_500"),
    )
    .unwrap();
    let refused = sweep_of(&["--resume"]);
    assert_eq!(code(&refused), 2);
    assert!(stderr(&refused).contains("edited"), "{}", stderr(&refused));
}

/// Starts a sweep of `seeds` on one thread, waits for `lines` results, sends `signal`, and
/// returns its output and the results file (in `dir`).
fn interrupt(dir: &Path, seeds: &str, lines: usize, signal: i32) -> (std::process::Output, String) {
    let file = dir.join("r.jsonl").display().to_string();
    let child = locksim()
        .args(["sweep", &repo(SCENARIO), "--seeds", seeds, "--jobs", "1"])
        .args(["--quiet", "--out", &file])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let count = || std::fs::read(&file).map_or(0, |b| b.iter().filter(|c| **c == b'\n').count());
    for _ in 0..4_000 {
        if count() >= lines {
            break;
        }
        // Real time on purpose: the test watches another process, not a simulation.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    (child.wait_with_output().unwrap(), file)
}

#[test]
fn sigint_flushes_and_prints_the_count_and_the_resume_command() {
    let dir = scratch("sweep-sigint");
    let (out, file) = interrupt(&dir, "0..400", 20, libc::SIGINT);
    let text = stdout(&out);
    assert_eq!(code(&out), 130, "{text}{}", stderr(&out));
    let saved = read_results(Path::new(&file)).unwrap().len();
    assert!((20..400).contains(&saved), "{text}");
    assert!(
        text.contains(&format!(
            "interrupted by SIGINT: {saved} of the 400 results of this sweep are saved in {file}"
        )),
        "{text}"
    );
    let resume = format!(
        "locksim sweep {} --seeds 0..=399 --jobs 1 --out {file} --resume --quiet",
        repo(SCENARIO)
    );
    let printed = text.lines().last().unwrap().trim();
    assert_eq!(printed, resume);
    // The printed command, run as it is, finishes the sweep: every seed exactly once.
    let args: Vec<&str> = printed.split(' ').skip(1).collect();
    let resumed = run(&args);
    assert!(code(&resumed) <= 1, "{}", stderr(&resumed));
    let seeds: Vec<u64> = by_seed(read_results(Path::new(&file)).unwrap())
        .iter()
        .map(|r| r.seed)
        .collect();
    assert_eq!(seeds, (0..400).collect::<Vec<_>>());
}

#[test]
fn sigterm_stops_a_sweep_the_same_way() {
    let dir = scratch("sweep-sigterm");
    let (out, file) = interrupt(&dir, "0..100000", 5, libc::SIGTERM);
    let text = stdout(&out);
    assert_eq!(code(&out), 143, "{text}{}", stderr(&out));
    let saved = read_results(Path::new(&file)).unwrap().len();
    assert!(
        text.contains(&format!("interrupted by SIGTERM: {saved} of the 100000")),
        "{text}"
    );
}

#[test]
fn seeds_near_u64_max_sweep() {
    let dir = scratch("sweep-max");
    let file = dir.join("r.jsonl");
    let top = format!("{}..={}", u64::MAX - 2, u64::MAX);
    let out = sweep(&top, &["--jobs", "2"], &file);
    assert!(code(&out) <= 1, "{}", stderr(&out));
    let seeds: Vec<u64> = by_seed(read_results(&file).unwrap())
        .iter()
        .map(|r| r.seed)
        .collect();
    assert_eq!(seeds, vec![u64::MAX - 2, u64::MAX - 1, u64::MAX]);
}
