//! `locksim report`: reports from the results files of earlier sweeps.

use crate::common;

use common::in_repo as locksim;

#[test]
fn shards_and_scenarios_merge_into_one_report_each_seed_once() {
    let d = common::scratch("report-merge");
    let file = |name: &str| d.join(name).to_str().unwrap().to_owned();
    for (scenario, seeds, shard, out) in [
        ("redis-single-healthy", "0..12", "0/2", "h0.jsonl"),
        ("redis-single-healthy", "0..12", "1/2", "h1.jsonl"),
        ("redis-single-gc-pause", "0..6", "0/1", "g.jsonl"),
    ] {
        let path = format!("scenarios/catalog/{scenario}.toml");
        let o = locksim(&[
            "sweep",
            &path,
            "--seeds",
            seeds,
            "--shard",
            shard,
            "--out",
            &file(out),
            "--quiet",
        ]);
        assert!(
            o.status.code().unwrap() <= 1,
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let out = file("rep");
    // h0 given twice: its seeds count once.
    let o = locksim(&[
        "report",
        &file("h0.jsonl"),
        &file("h1.jsonl"),
        &file("h0.jsonl"),
        &file("g.jsonl"),
        "--out",
        &out,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("rep/report.json")).unwrap()).unwrap();
    let cell = |scenario: &str| {
        json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["profile"] == scenario)
            .unwrap()
            .clone()
    };
    let healthy = cell("redis-single-healthy");
    assert_eq!(healthy["runs"], 12);
    assert_eq!(healthy["runs_invalid"], 0);
    let gc = cell("redis-single-gc-pause");
    assert_eq!(gc["runs"], 6);
    assert_eq!(gc["runs_violating"]["mutual_exclusion"], 6);
    assert_eq!(gc["failing"][0]["seed"], 0);
    assert_eq!(gc["overlap"]["k"], 6);
    assert_eq!(gc["seeds"], "0..=5");
    // The replay command is runnable: the results carry the scenario's path.
    let replay = gc["failing"][0]["replay"].as_str().unwrap();
    assert_eq!(
        replay,
        "locksim run scenarios/catalog/redis-single-gc-pause.toml --seed 0"
    );
    let args: Vec<&str> = replay.split_whitespace().skip(1).collect();
    assert_eq!(common::code(&locksim(&args)), 1, "{replay} reproduces it");
    // Descriptions of the protocol and of each scenario, from the registry and the files.
    let described = |key: &str| {
        json[key]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| !p[1].as_str().unwrap().is_empty())
    };
    assert!(described("protocols") && described("profiles"), "{json}");
    // The header counts the seeds per cell as they are: 6 in one, 12 in the other.
    let md = std::fs::read_to_string(d.join("rep/report.md")).unwrap();
    assert!(md.contains("(6–12 per cell"), "{md}");
    assert!(d.join("rep/report.html").exists());
}

#[test]
fn a_malformed_results_file_exits_2_naming_the_line() {
    let d = common::scratch("report-bad");
    let bad = d.join("bad.jsonl");
    std::fs::write(&bad, "{\"seed\": 1}\nnot json\n").unwrap();
    let o = locksim(&[
        "report",
        bad.to_str().unwrap(),
        "--out",
        d.join("r").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.jsonl:1"), "{err}");
}
