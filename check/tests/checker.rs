//! The checker on hand-built histories: each case could fail, and the safe ones must never
//! be flagged.

use locksim_check::checker::{check, Property, Verdict};
use locksim_check::history::{Event, Kind, Op};

/// Builds a history from (time_ms, node, kind, op, grant, token, value) rows.
struct H(Vec<Event>);

impl H {
    fn new() -> Self {
        H(vec![])
    }

    fn at(mut self, ms: u64, node: &str, kind: Kind, op: Op) -> Self {
        let mut e = Event::new(node, kind, op);
        e.index = self.0.len() as u64;
        e.time_ns = ms * 1_000_000;
        self.0.push(e);
        self
    }

    fn grant(mut self, g: &str) -> Self {
        self.0.last_mut().unwrap().grant = Some(g.into());
        self
    }

    fn token(mut self, t: u64) -> Self {
        self.0.last_mut().unwrap().token = Some(t);
        self
    }

    fn value(mut self, v: i64) -> Self {
        self.0.last_mut().unwrap().value = Some(v);
        self
    }

    fn target(mut self, t: &str) -> Self {
        self.0.last_mut().unwrap().target = Some(t.into());
        self
    }

    fn cs(self, node: &str, grant: &str, from: u64, to: u64) -> Self {
        self.at(from, node, Kind::Ok, Op::CsEnter)
            .grant(grant)
            .at(to, node, Kind::Ok, Op::CsExit)
            .grant(grant)
    }

    fn accept(self, ms: u64, grant: &str, token: Option<u64>, value: i64) -> Self {
        let h = self
            .at(ms, "resource", Kind::Info, Op::ResourceAccept)
            .grant(grant)
            .value(value);
        match token {
            Some(t) => h.token(t),
            None => h,
        }
    }

    fn acked_write(self, ms: u64, node: &str, grant: &str, value: i64) -> Self {
        self.at(ms, node, Kind::Ok, Op::Write)
            .grant(grant)
            .value(value)
    }

    fn sorted(mut self) -> Vec<Event> {
        self.0.sort_by_key(|e| e.time_ns);
        for (i, e) in self.0.iter_mut().enumerate() {
            e.index = i as u64;
        }
        self.0
    }
}

#[test]
fn an_empty_history_is_unknown_not_valid() {
    let r = check(&[]);
    assert_eq!(
        r.verdict,
        Verdict::Unknown,
        "no events is no evidence of safety"
    );
    assert!(r.violations.is_empty());
}

#[test]
fn sequential_critical_sections_are_valid() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c2", "c2#1", 20, 30)
        .sorted();
    let r = check(&h);
    assert_eq!(r.verdict, Verdict::Valid, "{r:?}");
    assert_eq!(r.liveness.held_ms, 20.0);
}

#[test]
fn overlapping_critical_sections_violate_mutual_exclusion() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c2", "c2#1", 9, 30)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    assert_eq!(r.verdict, Verdict::Invalid);
    let v = &r.violations[0];
    assert_eq!(v.kind, Property::MutualExclusion);
    // Witness: both enters and both exits.
    assert_eq!(v.events, vec![0, 1, 2, 3]);
    assert_eq!(h[v.events[1] as usize].node, "c2");
}

#[test]
fn touching_critical_sections_do_not_overlap() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c2", "c2#1", 10, 20)
        .sorted();
    assert_eq!(check(&h).verdict, Verdict::Valid);
}

#[test]
fn same_grant_twice_is_not_a_violation() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c1b", "c1#1", 5, 15)
        .sorted();
    assert_eq!(
        check(&h).property(Property::MutualExclusion),
        Verdict::Valid
    );
}

#[test]
fn an_open_critical_section_lasts_to_the_end() {
    let h = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .cs("c2", "c2#1", 50, 60)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    assert!(r.violations[0].description.contains("still inside"));
}

/// Sections still open at the end are inside at its last instant, together: even when the
/// last event is one's own `cs_enter`, it overlaps the others still inside.
#[test]
fn sections_open_at_the_end_overlap_even_when_the_last_event_enters_one() {
    let both = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(10, "c2", Kind::Ok, Op::CsEnter)
        .grant("c2#1")
        .sorted();
    let r = check(&both);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    assert!(r.violations[0].description.contains("still inside"));
    let three = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(10, "c2", Kind::Ok, Op::CsEnter)
        .grant("c2#1")
        .at(20, "c3", Kind::Ok, Op::CsEnter)
        .grant("c3#1")
        .sorted();
    assert_eq!(
        check(&three).violation_counts()[&Property::MutualExclusion],
        3
    );
    // A section that did exit at the end's instant touches one entered then: no overlap.
    let touching = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(10, "c1", Kind::Ok, Op::CsExit)
        .grant("c1#1")
        .at(10, "c2", Kind::Ok, Op::CsEnter)
        .grant("c2#1")
        .sorted();
    assert_eq!(
        check(&touching).property(Property::MutualExclusion),
        Verdict::Valid
    );
    // One whose exit began but never completed may still be inside at the end.
    let leaving = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(5, "c1", Kind::Invoke, Op::CsExit)
        .grant("c1#1")
        .at(10, "c2", Kind::Ok, Op::CsEnter)
        .grant("c2#1")
        .sorted();
    assert_eq!(
        check(&leaving).property(Property::MutualExclusion),
        Verdict::Unknown
    );
}

#[test]
fn a_crash_ends_the_critical_section() {
    let h = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(10, "nemesis", Kind::Info, Op::Crash)
        .target("c1")
        .cs("c2", "c2#1", 20, 30)
        .sorted();
    assert_eq!(
        check(&h).property(Property::MutualExclusion),
        Verdict::Valid
    );
}

#[test]
fn a_crash_of_another_node_does_not_end_it() {
    let h = H::new()
        .at(0, "c1", Kind::Ok, Op::CsEnter)
        .grant("c1#1")
        .at(10, "nemesis", Kind::Info, Op::Crash)
        .target("redis")
        .cs("c2", "c2#1", 20, 30)
        .sorted();
    assert_eq!(
        check(&h).property(Property::MutualExclusion),
        Verdict::Invalid
    );
}

#[test]
fn stale_token_accepted_violates_fencing() {
    let h = H::new()
        .accept(10, "c2#1", Some(2), 1)
        .accept(20, "c1#1", Some(1), 2)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::Fencing), Verdict::Invalid);
    assert_eq!(r.violations[0].events, vec![0, 1]);
    assert!(r.violations[0].description.contains("stale token"));
    assert_eq!((r.fencing.stale_accepted, r.fencing.token_reused), (1, 0));
}

#[test]
fn stale_token_rejected_keeps_fencing() {
    let h = H::new()
        .accept(10, "c2#1", Some(2), 1)
        .at(20, "resource", Kind::Info, Op::ResourceReject)
        .grant("c1#1")
        .token(1)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::Fencing), Verdict::Valid);
    assert_eq!(r.liveness.writes_rejected, 1);
}

#[test]
fn increasing_tokens_and_repeats_within_a_grant_are_fine() {
    let h = H::new()
        .accept(10, "c1#1", Some(1), 1)
        .accept(11, "c1#1", Some(1), 2)
        .accept(20, "c2#1", Some(5), 3)
        .sorted();
    assert_eq!(check(&h).verdict, Verdict::Valid);
}

#[test]
fn token_reused_by_two_grants_violates_fencing() {
    // E.g. a counter that repeats after a failover.
    let h = H::new()
        .accept(10, "c1#1", Some(3), 1)
        .accept(20, "c2#1", Some(3), 2)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::Fencing), Verdict::Invalid);
    assert!(r.violations[0].description.contains("reused"));
    assert_eq!((r.fencing.stale_accepted, r.fencing.token_reused), (0, 1));
}

#[test]
fn writes_without_tokens_are_not_judged_by_fencing() {
    let h = H::new()
        .accept(10, "c1#1", None, 1)
        .accept(20, "c2#1", None, 2)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::Fencing), Verdict::NotApplicable);
    assert_eq!(
        r.verdict,
        Verdict::Valid,
        "n/a does not make the run unknown"
    );
}

#[test]
fn lost_update_is_detected_with_the_overwriting_pair() {
    // Both read 0 and wrote 1: two acknowledged increments, final value 1.
    let h = H::new()
        .accept(10, "c2#1", None, 1)
        .acked_write(11, "c2", "c2#1", 1)
        .accept(20, "c1#1", None, 1)
        .acked_write(21, "c1", "c1#1", 1)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::LostUpdate), Verdict::Invalid);
    let v = r
        .violations
        .iter()
        .find(|v| v.kind == Property::LostUpdate)
        .unwrap();
    assert_eq!(v.events, vec![0, 2]);
    assert!(v.description.contains("1 lost"));
}

#[test]
fn no_lost_update_when_every_increment_counts() {
    let h = H::new()
        .accept(10, "c1#1", None, 1)
        .acked_write(11, "c1", "c1#1", 1)
        .accept(20, "c2#1", None, 2)
        .acked_write(21, "c2", "c2#1", 2)
        .sorted();
    assert_eq!(check(&h).property(Property::LostUpdate), Verdict::Valid);
}

#[test]
fn an_unacknowledged_accepted_write_is_not_a_lost_update() {
    // The second write was applied but its ack was lost (outcome info): final 2 >= 1 acked.
    let h = H::new()
        .accept(10, "c1#1", None, 1)
        .acked_write(11, "c1", "c1#1", 1)
        .accept(20, "c2#1", None, 2)
        .at(30, "c2", Kind::Info, Op::Write)
        .grant("c2#1")
        .value(2)
        .sorted();
    assert_eq!(check(&h).property(Property::LostUpdate), Verdict::Valid);
}

#[test]
fn an_unacknowledged_stale_write_cannot_hide_a_lost_increment() {
    // c2 reads 0 and writes 1 (acknowledged); c1 read 0 before its pause and writes 1 too
    // (applied, acknowledgement lost); c3 reads 1 and writes 2 (acknowledged). Two
    // acknowledged writes and a final value of 2 look fine, but three increments were
    // applied: c2's was overwritten.
    let h = H::new()
        .accept(10, "c2#1", None, 1)
        .acked_write(11, "c2", "c2#1", 1)
        .accept(20, "c1#1", None, 1)
        .accept(30, "c3#1", None, 2)
        .acked_write(31, "c3", "c3#1", 2)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::LostUpdate), Verdict::Invalid);
    assert_eq!(r.violations[0].events, vec![0, 2]);
}

#[test]
fn a_duplicated_write_applied_twice_counts_once() {
    let h = H::new()
        .accept(10, "c1#1", None, 1)
        .accept(12, "c1#1", None, 1)
        .acked_write(13, "c1", "c1#1", 1)
        .sorted();
    assert_eq!(check(&h).property(Property::LostUpdate), Verdict::Valid);
}

#[test]
fn acknowledged_writes_without_resource_records_are_unknown() {
    let h = H::new().acked_write(11, "c1", "c1#1", 1).sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::LostUpdate), Verdict::Unknown);
    assert_eq!(r.verdict, Verdict::Unknown);
    let reason = r.properties[2].reason.as_deref().unwrap();
    assert!(reason.contains("final value is unknown"), "{reason}");
}

#[test]
fn invalid_beats_unknown_when_combining() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c2", "c2#1", 5, 30)
        .acked_write(11, "c1", "c1#1", 1)
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::LostUpdate), Verdict::Unknown);
    assert_eq!(r.verdict, Verdict::Invalid);
}

#[test]
fn liveness_figures() {
    let h = H::new()
        .at(0, "c1", Kind::Invoke, Op::Acquire)
        .at(10, "c1", Kind::Ok, Op::Acquire)
        .cs("c1", "c1#1", 10, 20)
        .at(5, "c2", Kind::Invoke, Op::Acquire)
        .at(50, "c2", Kind::Ok, Op::Acquire)
        .cs("c2", "c2#1", 50, 60)
        .at(70, "c1", Kind::Invoke, Op::Acquire)
        .at(80, "c1", Kind::Fail, Op::Acquire)
        .sorted();
    let l = check(&h).liveness;
    assert_eq!(
        (l.acquire_attempts, l.acquisitions, l.acquire_failures),
        (3, 2, 1)
    );
    assert_eq!(l.held_ms, 20.0);
    // Wanted but free: 0-10 (c1 waiting), 20-50 (c2 waiting), 70-80 (c1 waiting).
    assert_eq!(l.wanted_free_ms, 50.0);
    assert_eq!(l.wanted_free_ms_max, 30.0);
    assert_eq!(l.acquire_latency_ms_p50, 10.0);
    assert_eq!(l.first_grant_ms, Some(10.0));
    assert_eq!(l.acquire_latency_ms_p99, 45.0);
}

#[test]
fn a_failed_attempt_does_not_end_the_wanting() {
    // c1 gives up at 10 ms, pauses, tries again at 50 ms and gets the lock at 60 ms: it
    // wanted the lock, free, for the whole 60 ms.
    let h = H::new()
        .at(0, "c1", Kind::Invoke, Op::Acquire)
        .at(10, "c1", Kind::Fail, Op::Acquire)
        .at(50, "c1", Kind::Invoke, Op::Acquire)
        .at(60, "c1", Kind::Ok, Op::Acquire)
        .cs("c1", "c1#1", 60, 70)
        .sorted();
    let l = check(&h).liveness;
    assert_eq!(l.wanted_free_ms_max, 60.0);
    assert_eq!(l.acquire_latency_ms_p50, 10.0, "latency is per attempt");
}

#[test]
fn one_history_breaking_every_property_once() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c2", "c2#1", 9, 30)
        .accept(10, "c2#1", Some(2), 1)
        .accept(20, "c1#1", Some(1), 1)
        .sorted();
    let report = check(&h);
    // The sections overlap from 9 to 10 ms; token 1 is accepted after token 2; two applied
    // increments leave the counter at 1.
    let counts: Vec<(Property, u64)> = report.violation_counts().into_iter().collect();
    assert_eq!(
        counts,
        [
            (Property::MutualExclusion, 1),
            (Property::Fencing, 1),
            (Property::LostUpdate, 1)
        ]
    );
    assert_eq!(report.updates.writes_applied, 2);
    assert_eq!(report.updates.updates_lost, 1);
    assert_eq!(report.verdict, Verdict::Invalid);
}

#[test]
fn fencing_without_a_token_is_not_applicable_and_an_empty_history_is_unknown() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .accept(5, "c1#1", None, 1)
        .sorted();
    let report = check(&h);
    assert_eq!(report.property(Property::Fencing), Verdict::NotApplicable);
    assert_eq!(
        report.verdict,
        Verdict::Valid,
        "n/a does not make a run unknown"
    );
    let empty = check(&[]);
    assert_eq!(empty.verdict, Verdict::Unknown);
    for p in Property::ALL {
        assert_eq!(empty.property(p), Verdict::Unknown);
        assert_eq!(
            empty.result(p).unwrap().reason.as_deref(),
            Some("no events: nothing to check")
        );
    }
}

#[test]
fn an_info_enter_that_overlaps_is_unknown_with_the_reason() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .at(5, "c2", Kind::Info, Op::CsEnter)
        .grant("c2#1")
        .at(20, "c2", Kind::Ok, Op::CsExit)
        .grant("c2#1")
        .sorted();
    let r = check(&h);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Unknown);
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r.violations.is_empty());
    let reason = r
        .result(Property::MutualExclusion)
        .unwrap()
        .reason
        .clone()
        .unwrap();
    assert!(
        reason.starts_with("1 pair of critical sections may overlap"),
        "{reason}"
    );
    assert!(reason.contains("c2 may have held grant c2#1"), "{reason}");
    assert!(
        reason.contains("c2#1 from 5.000ms to 20.000ms (its cs_enter is `info`"),
        "{reason}"
    );
    assert!(
        !reason.contains("c1#1 from 0.000ms to 10.000ms (its"),
        "{reason}"
    );
    assert_eq!(r.reasons().len(), 1);
}

#[test]
fn an_info_enter_alone_is_valid_and_a_certain_overlap_still_invalid() {
    let alone = H::new()
        .cs("c1", "c1#1", 0, 10)
        .at(10, "c2", Kind::Info, Op::CsEnter)
        .grant("c2#1")
        .sorted();
    assert_eq!(check(&alone).verdict, Verdict::Valid);
    let both = H::new()
        .cs("c1", "c1#1", 0, 10)
        .cs("c3", "c3#1", 2, 4)
        .at(5, "c2", Kind::Info, Op::CsEnter)
        .grant("c2#1")
        .sorted();
    let r = check(&both);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    assert_eq!(r.violation_counts()[&Property::MutualExclusion], 1);
}

#[test]
fn counts_are_exact_and_witnesses_capped() {
    let mut h = H::new();
    for c in 0..20 {
        h = h.cs(&format!("c{c}"), &format!("c{c}#1"), c, 100 + c);
    }
    let r = check(&h.sorted());
    let me = r.result(Property::MutualExclusion).unwrap();
    assert_eq!(me.violation_count, 20 * 19 / 2);
    assert_eq!(r.violations.len(), locksim_check::checker::WITNESSES_MAX);
}

#[test]
fn witness_times_are_exact_to_the_nanosecond() {
    let mut h = H::new()
        .cs("c1", "c1#1", 0, 0)
        .cs("c2", "c2#1", 0, 0)
        .sorted();
    // c1 holds [1 µs, 2.000001 ms), c2 from 2 ms: 1 ns of overlap.
    for (e, t) in h.iter_mut().zip([1_000, 2_000_001, 2_000_000, 3_000_000]) {
        e.time_ns = t;
    }
    h.sort_by_key(|e| e.time_ns);
    let r = check(&h);
    assert_eq!(r.property(Property::MutualExclusion), Verdict::Invalid);
    let text = &r.violations[0].description;
    assert!(text.contains("to 2.000001ms"), "{text}");
    assert!(text.contains("from 2.000ms"), "{text}");
}

#[test]
fn lost_updates_as_a_share_of_acknowledged_writes() {
    let h = H::new()
        .accept(10, "c2#1", None, 1)
        .acked_write(11, "c2", "c2#1", 1)
        .accept(20, "c1#1", None, 1)
        .acked_write(21, "c1", "c1#1", 1)
        .sorted();
    let u = check(&h).updates;
    assert_eq!(
        (u.writes_acknowledged, u.writes_applied, u.updates_lost),
        (2, 2, 1)
    );
    assert_eq!(u.lost_share_of_acknowledged(), Some(0.5));
    assert_eq!(check(&[]).updates.lost_share_of_acknowledged(), None);
}

#[test]
fn extreme_values_do_not_overflow() {
    let mut h = H::new()
        .accept(10, "c1#1", Some(u64::MAX), i64::MIN)
        .acked_write(11, "c1", "c1#1", i64::MIN)
        .cs("c2", "c2#1", 12, 13)
        .sorted();
    h[2].time_ns = u64::MAX - 1;
    h[2].clock_error_ns = Some(u64::MAX);
    h[3].time_ns = u64::MAX;
    let r = check(&h);
    assert_eq!(r.property(Property::LostUpdate), Verdict::Invalid);
    assert_eq!(r.updates.updates_lost, (1u64 << 63) + 1);
}

#[test]
fn names_are_those_files_and_reports_use() {
    let names: Vec<String> = Property::ALL.iter().map(|p| format!("{p:<17}|")).collect();
    assert_eq!(
        names,
        [
            "mutual_exclusion |",
            "fencing          |",
            "lost_update      |"
        ]
    );
    for p in Property::ALL {
        assert_eq!(serde_json::to_value(p).unwrap(), p.name());
    }
    let words: Vec<String> = [Verdict::Valid, Verdict::Unknown, Verdict::Invalid]
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert_eq!(words, ["valid", "unknown", "invalid"]);
}

#[test]
fn a_failed_enter_is_no_critical_section() {
    let h = H::new()
        .cs("c1", "c1#1", 0, 10)
        .at(2, "c2", Kind::Invoke, Op::CsEnter)
        .grant("c2#1")
        .at(3, "c2", Kind::Fail, Op::CsEnter)
        .grant("c2#1")
        .at(5, "c2", Kind::Ok, Op::CsExit)
        .grant("c2#1")
        .sorted();
    assert_eq!(check(&h).verdict, Verdict::Valid);
}

#[test]
fn fencing_counts_every_stale_write_and_keeps_the_first_witnesses() {
    let mut h = H::new().accept(10, "c9#1", Some(100), 1);
    for i in 0..7 {
        h = h.accept(20 + i, &format!("c{i}#1"), Some(1 + i), 2 + i as i64);
    }
    let r = check(&h.sorted());
    let fencing = r.result(Property::Fencing).unwrap();
    assert_eq!(fencing.violation_count, 7);
    // Tokens 1..=7 after 100: each stale, none reused (each grant has its own token).
    assert_eq!((r.fencing.stale_accepted, r.fencing.token_reused), (7, 0));
    let kept = r.violations.iter().filter(|v| v.kind == Property::Fencing);
    assert_eq!(kept.count(), locksim_check::checker::WITNESSES_MAX);
}

#[test]
fn a_stale_write_is_witnessed_by_the_first_accept_of_the_highest_token() {
    let h = H::new()
        .accept(10, "c1#1", Some(5), 1)
        .accept(11, "c1#1", Some(5), 2)
        .accept(20, "c2#1", Some(3), 3)
        .sorted();
    let r = check(&h);
    assert_eq!(r.violations[0].events, vec![0, 2]);
}

#[test]
fn report_maps_and_resource_and_liveness_counters() {
    // c1 asks, its outcome is never learned; c2 asks and crashes while waiting; two writes
    // of the same grant then one of another grant with the same value overwrite each other.
    let h = H::new()
        .at(0, "c1", Kind::Invoke, Op::Acquire)
        .at(5, "c1", Kind::Info, Op::Acquire)
        .at(8, "c1", Kind::Ok, Op::Acquire)
        .cs("c1", "c1#1", 8, 9)
        .at(10, "c2", Kind::Invoke, Op::Acquire)
        .at(20, "nemesis", Kind::Info, Op::Crash)
        .target("c2")
        .accept(30, "c3#1", None, 1)
        .accept(31, "c3#1", None, 1)
        .accept(40, "c4#1", None, 1)
        .acked_write(41, "c4", "c4#1", 1)
        .acked_write(42, "c3", "c3#1", 1)
        .at(100, "c5", Kind::Info, Op::Note)
        .sorted();
    let r = check(&h);
    assert_eq!(r.verdicts().len(), 3);
    assert_eq!(r.verdicts()[&Property::LostUpdate], Verdict::Invalid);
    let counts = r.violation_counts();
    assert_eq!(counts.keys().collect::<Vec<_>>(), [&Property::LostUpdate]);
    let lost = r
        .violations
        .iter()
        .find(|v| v.kind == Property::LostUpdate)
        .unwrap();
    assert_eq!(
        lost.events,
        vec![7, 9],
        "c3's first write and c4's, not c3's two"
    );
    let l = &r.liveness;
    assert_eq!((l.acquire_attempts, l.acquire_unknown), (2, 1));
    assert_eq!(l.writes_accepted, 3);
    // Wanted and free: c1 0-8 (an unknown outcome does not end the wanting), c2 10-20 (the
    // crash ends it).
    assert_eq!(l.wanted_free_ms, 18.0);
}
