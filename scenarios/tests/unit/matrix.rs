//! The tests of `src/matrix.rs`.

#[test]
fn an_axis_may_have_its_own_sizes_and_bad_sizes_are_refused() {
    let m = Matrix::parse(STANDARD, "matrix.toml").unwrap();
    let phase = m.phase.as_ref().unwrap();
    assert_eq!(phase.multiples("pause"), [0.5, 1.0, 2.0, 4.0]);
    assert_eq!(phase.multiples("clock_jump"), [0.5, 1.0, 2.0]);
    let with =
        |line: &str| STANDARD.replace("axis_ttl_multiples = { clock_jump = [0.5, 1, 2] }", line);
    let e = Matrix::parse(&with("axis_ttl_multiples = { pauses = [1] }"), "m.toml")
        .err()
        .unwrap();
    assert!(
        e.contains("m.toml") && e.contains("no axis `pauses`"),
        "{e}"
    );
    let text = STANDARD.replace("ttl_multiples = [0.5, 1, 2, 4]", "ttl_multiples = [0, 1]");
    let e = Matrix::parse(&text, "m.toml").err().unwrap();
    assert!(e.contains("[phase] ttl_multiples"), "{e}");
    let e = Matrix::parse(&with("axis_ttl_multiples = { pause = [] }"), "m.toml")
        .err()
        .unwrap();
    assert!(e.contains("axis_ttl_multiples.pause"), "{e}");
}

use locksim_protocols::Registry;
use locksim_scenarios::matrix::*;
use locksim_scenarios::scenario::Scenario;

#[test]
fn the_standard_matrix_and_every_cell_parse() {
    let m = Matrix::standard();
    for p in &m.protocols {
        for f in &m.profiles {
            m.cell(p, f).unwrap();
        }
        let (name, text) = m.uncontended_toml(p);
        let alone = Scenario::parse(&text, &name).unwrap();
        assert_eq!(alone.workload.clients, 1, "{text}");
        assert!(!alone.faults_random.is_active(), "{text}");
        for (axis, _) in PHASE_AXES {
            let (name, size, text) = m.phase_toml(p, axis, 0.5, &Registry::builtin());
            assert_eq!(size, p.ttl_ms(&Registry::builtin()) / 2);
            Scenario::parse(&text, &name).unwrap();
        }
    }
    assert!(m.protocols.iter().any(|p| p.label.ends_with("+cas")));
    assert!(CATALOG.iter().any(|(n, _)| *n == "redlock-clock-jump"));
    for (name, text) in CATALOG {
        Scenario::parse(text, name).unwrap();
    }
}

/// A row's TTL is what its protocol configures: a client profile's default lease when the
/// row sets none, the row's own key otherwise, etcd's rounding applied.
#[test]
fn a_rows_ttl_is_its_protocols_effective_lease() {
    let registry = Registry::builtin();
    let row = |table: &str| MatrixProtocol {
        label: "row".into(),
        description: String::new(),
        protocol: toml::from_str(table).unwrap(),
        resource: None,
        workload: None,
        phase_axes: None,
        phase_axes_why: None,
        same_as: None,
    };
    let go = row("name = \"etcd\"\nclient = \"etcd-concurrency-3.5\"");
    assert_eq!(go.ttl_ms(&registry), 60_000, "the Go client's 60 s session");
    let set = row("name = \"etcd\"\nclient = \"etcd-concurrency-3.5\"\nlease_ttl_ms = 5_000");
    assert_eq!(set.ttl_ms(&registry), 5_000);
    let rounded = row("name = \"etcd\"\nlease_ttl_ms = 1_000\nttl_rounding = \"etcd\"");
    assert_eq!(rounded.ttl_ms(&registry), 2_000, "etcd's minimum lease");
    assert_eq!(row("name = \"etcd\"").ttl_ms(&registry), 2_000);
    let zk = row("name = \"zookeeper\"\nsession_timeout_ms = 4_000");
    assert_eq!(zk.ttl_ms(&registry), 4_000);
    assert_eq!(
        row("name = \"redlock\"\nttl_ms = 700").ttl_ms(&registry),
        700
    );
    let m = Matrix::standard();
    let (_, size_ms, _) = m.phase_toml(&go, "pause", 0.5, &registry);
    assert_eq!(size_ms, 30_000, "phase sizes follow the effective lease");
    let unknown = row("name = \"no-such\"\nlease_ttl_ms = 900");
    assert_eq!(
        unknown.ttl_ms(&registry),
        900,
        "a protocol the registry lacks: the keys"
    );
}

#[test]
fn stopping_runs_the_minimum_then_steps_to_the_cap() {
    let s = Stopping {
        seeds_min: 100,
        seeds_max: 400,
        seeds_step: 50,
        half_width_max: 0.05,
    };
    assert_eq!(s.target(0, &[]), 100);
    assert_eq!(s.target(100, &[0.0185]), 100);
    assert_eq!(s.target(100, &[0.0185, 0.086]), 150);
    assert_eq!(s.target(380, &[0.06]), 400);
    assert_eq!(s.target(400, &[0.06]), 400);
    assert_eq!(Stopping::fixed(4).target(4, &[0.5]), 4);
}
