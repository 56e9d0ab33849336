//! The scenario file format (TOML): one protocol with its parameters, the cluster's clients
//! and workload, the network, node clocks, the resource, the fault schedule (scripted and a
//! seeded random profile), the duration, and what the run is expected to show.
//!
//! Bad input gets a clear error: [`ScenarioError`] names the file, the line and the field.

pub use crate::workload::Workload;
use locksim_check::input::{read_to_string_bounded, FILE_BYTES_MAX};
use locksim_protocols::resource::{Fencing, ResourceRules, WriteMode};
use locksim_protocols::{Deployment, Registry};
use locksim_sim::checker::Liveness;
use locksim_sim::nodes::ArmedPoint;
use locksim_sim::roles::{is_group, is_role, ROLE_HOLDER};
use locksim_sim::{ClockConfig, DiskConfig, Fault, FaultProfile, NetConfig, Property, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A scenario, as written in its file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (default: the file name without `.toml`).
    #[serde(default)]
    pub name: String,
    /// What the scenario shows, for people (sources welcome).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The seed `locksim run` uses when none is given: an integer, or a string for seeds
    /// above `i64::MAX` (TOML integers are signed).
    #[serde(default = "default_seed", with = "crate::bounds::seed")]
    pub seed: u64,
    /// How long the run lasts, in simulated ms.
    pub duration_ms: u64,
    /// A liveness phase after `duration_ms` in which every fault is undone, in ms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub heal_ms: u64,
    /// The protocol and its parameters.
    pub protocol: ProtocolSection,
    /// The clients and what they do.
    #[serde(default)]
    pub workload: Workload,
    /// The network.
    #[serde(default)]
    pub network: NetConfig,
    /// Node clocks.
    #[serde(default)]
    pub clocks: ClockConfig,
    /// The nodes' disks (fsync latency).
    #[serde(default, skip_serializing_if = "is_default_disk")]
    pub disk: DiskConfig,
    /// The fenced resource.
    #[serde(default)]
    pub resource: ResourceConfig,
    /// Scripted faults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Random faults drawn from the seed.
    #[serde(default, skip_serializing_if = "is_default_profile")]
    pub faults_random: FaultProfile,
    /// What the run must show, per property.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// For `locksim validate`: why a property's live and simulated shares may disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationNotes>,
}

/// `[validation]`: notes that travel with a validation scenario's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationNotes {
    /// Per property (`mutual_exclusion`, `fencing`, `lost_update`): the known cause of a
    /// disagreement between the live and the simulated share, in words.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub explanation: BTreeMap<String, String>,
    /// In the default set of `locksim validate` (without `--full`): the few sharp rows that
    /// reach their power in about a quarter of an hour.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default_set: bool,
}

fn default_seed() -> u64 {
    1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_default_disk(d: &DiskConfig) -> bool {
    *d == DiskConfig::default()
}

fn is_default_profile(p: &FaultProfile) -> bool {
    !p.is_active()
}

/// `[protocol]`: `name` picks the protocol; every other key is its parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProtocolSection {
    /// The protocol id, e.g. `single-redis`.
    pub name: String,
    /// The protocol's parameters.
    #[serde(flatten)]
    pub params: toml::Table,
}

/// `[resource]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// `on`: reject writes with a token below the highest seen.
    #[serde(default)]
    pub fencing: Fencing,
    /// `cas`: a write applies only if the counter still holds the value its writer read
    /// (compare-and-set); `plain` (the default) overwrites.
    #[serde(default, skip_serializing_if = "is_plain")]
    pub mode: WriteMode,
}

fn is_plain(mode: &WriteMode) -> bool {
    *mode == WriteMode::Plain
}

impl ResourceConfig {
    /// The rules the resource applies.
    pub fn rules(&self) -> ResourceRules {
        ResourceRules {
            fencing: self.fencing,
            mode: self.mode,
        }
    }
}

/// What a property must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    /// No violation.
    Holds,
    /// At least one violation.
    Violated,
    /// The run cannot show the property (fencing, when no write carries a token): `holds`
    /// is refused there, as nothing was checked.
    NotApplicable,
}

impl Expectation {
    /// The name a scenario file uses.
    pub fn name(self) -> &'static str {
        match self {
            Expectation::Holds => "holds",
            Expectation::Violated => "violated",
            Expectation::NotApplicable => "not_applicable",
        }
    }
}

/// `[expect]`: per property, `holds`, `violated` or `not_applicable` (unlisted properties are
/// not checked), and
/// optional liveness bounds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Mutual exclusion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutual_exclusion: Option<Expectation>,
    /// Fencing safety.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing: Option<Expectation>,
    /// Lost update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_update: Option<Expectation>,
    /// At least this many acquisitions in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquisitions_min: Option<u64>,
    /// At most this many acquisitions in the run (a stuck lock grants few).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquisitions_max: Option<u64>,
    /// The first grant comes no earlier than this, in ms (a lock left unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_ms_min: Option<f64>,
    /// The first grant comes no later than this, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_grant_ms_max: Option<f64>,
    /// How many faults of the schedule must fire: `"all"` or at least a count. A fault at a
    /// point whose passage never comes, or on a role nobody has, is scheduled and never
    /// fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults_fired: Option<FaultsFired>,
}

/// `[expect] faults_fired`: every fault of the schedule, or at least this many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FaultsFired {
    /// `"all"`.
    All(AllFaults),
    /// At least this many.
    AtLeast(u64),
}

/// The word `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllFaults {
    /// Every fault of the schedule.
    All,
}

impl Expect {
    /// The expectations that are set.
    pub fn entries(&self) -> Vec<(Property, Expectation)> {
        [
            (Property::MutualExclusion, self.mutual_exclusion),
            (Property::Fencing, self.fencing),
            (Property::LostUpdate, self.lost_update),
        ]
        .into_iter()
        .filter_map(|(p, e)| e.map(|e| (p, e)))
        .collect()
    }

    /// A range no run can meet (a minimum above its maximum) is refused: the key and why.
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if let (Some(min), Some(max)) = (self.acquisitions_min, self.acquisitions_max) {
            if min > max {
                return Err((
                    "acquisitions_min",
                    format!("({min}) exceeds acquisitions_max ({max}): no run can meet both"),
                ));
            }
        }
        if let (Some(min), Some(max)) = (self.first_grant_ms_min, self.first_grant_ms_max) {
            if min > max {
                return Err((
                    "first_grant_ms_min",
                    format!("({min}) exceeds first_grant_ms_max ({max}): no run can meet both"),
                ));
            }
        }
        Ok(())
    }

    /// Which liveness expectations the run's figures do not meet, in words.
    pub fn liveness_mismatches(&self, l: &Liveness) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(min) = self.acquisitions_min.filter(|m| l.acquisitions < *m) {
            out.push(format!(
                "acquisitions: expected at least {min}, got {}",
                l.acquisitions
            ));
        }
        if let Some(max) = self.acquisitions_max.filter(|m| l.acquisitions > *m) {
            out.push(format!(
                "acquisitions: expected at most {max}, got {}",
                l.acquisitions
            ));
        }
        let first = l.first_grant_ms;
        let shown = first.map_or("none".to_owned(), |t| format!("{t:.1} ms"));
        if let Some(min) = self.first_grant_ms_min {
            if first.is_some_and(|t| t < min) {
                out.push(format!(
                    "first grant: expected at {min} ms or later, got {shown}"
                ));
            }
        }
        if let Some(max) = self.first_grant_ms_max {
            if first.is_none_or(|t| t > max) {
                out.push(format!("first grant: expected by {max} ms, got {shown}"));
            }
        }
        out
    }

    /// Whether enough of the schedule's faults fired, in words if not.
    pub fn fault_mismatches(&self, fired: u64, scheduled: u64) -> Vec<String> {
        let (wanted, shown) = match self.faults_fired {
            None => return vec![],
            Some(FaultsFired::All(_)) => (scheduled, format!("all {scheduled}")),
            Some(FaultsFired::AtLeast(n)) => (n, format!("at least {n}")),
        };
        if fired >= wanted {
            return vec![];
        }
        vec![format!(
            "faults fired: expected {shown}, got {fired} of {scheduled} (a point's passage \
             that never came, or a role nobody had)"
        )]
    }

    /// Which expectations a set of per-property verdicts does not meet, in words.
    pub fn mismatches(&self, verdict_of: impl Fn(Property) -> Verdict) -> Vec<String> {
        self.entries()
            .into_iter()
            .filter_map(|(p, e)| {
                let v = verdict_of(p);
                let met = match e {
                    Expectation::Holds => v == Verdict::Valid,
                    Expectation::Violated => v == Verdict::Invalid,
                    Expectation::NotApplicable => v == Verdict::NotApplicable,
                };
                (!met).then(|| format!("{}: expected {}, got {}", p.name(), e.name(), shown(v)))
            })
            .collect()
    }
}

/// A verdict in `[expect]`'s words (`holds`, `violated`), `n/a` and `unknown` as they are.
fn shown(v: Verdict) -> &'static str {
    match v {
        Verdict::Valid => Expectation::Holds.name(),
        Verdict::Invalid => Expectation::Violated.name(),
        Verdict::NotApplicable => "n/a",
        Verdict::Unknown => "unknown",
    }
}

/// A scenario file that cannot be used: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScenarioError {
    /// The file.
    pub path: String,
    /// 1-based line, where known.
    pub line: Option<usize>,
    /// The field (dotted path), where known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ScenarioError {
    fn render(&self) -> String {
        let place = match self.line {
            Some(l) => format!("{}:{l}", self.path),
            None => self.path.clone(),
        };
        match &self.field {
            Some(f) if !self.message.contains(f.as_str()) => {
                format!("{place}: {f}: {}", self.message)
            }
            _ => format!("{place}: {}", self.message),
        }
    }
}

/// A scenario checked against the protocol registry, ready to run.
pub struct Prepared {
    /// The scenario.
    pub scenario: Scenario,
    /// Where it came from (for replay commands).
    pub path: String,
    /// The configured protocol.
    pub deployment: Box<dyn Deployment>,
    /// What the file says that is valid but likely not meant, for stderr
    /// (`file:line: field: why`).
    pub warnings: Vec<String>,
}

/// A scenario file's text (bounded), or nothing: only to name the line of an error.
fn text_of(path: &str) -> String {
    read_to_string_bounded(Path::new(path), FILE_BYTES_MAX).unwrap_or_default()
}

impl Scenario {
    /// A stable hash of everything in the scenario that can change a run's result (its
    /// `description` and default `seed` do not): a sweep refuses to resume into the results
    /// of an edited scenario.
    pub fn fingerprint(&self) -> String {
        let mut canonical = self.clone();
        canonical.description.clear();
        canonical.seed = 0;
        let text = toml::to_string(&canonical).expect("a scenario serialises");
        locksim_sim::history::format_hash(locksim_sim::history::stable_hash(text.as_bytes()))
    }

    /// Reads and checks a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text =
            read_to_string_bounded(path, FILE_BYTES_MAX).map_err(|message| ScenarioError {
                path: shown.clone(),
                line: None,
                field: None,
                message,
            })?;
        let mut scenario = Scenario::parse(&text, &shown)?;
        if scenario.name.is_empty() {
            scenario.name = path
                .file_stem()
                .map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
        }
        Ok(scenario)
    }

    /// Parses scenario text; `path` is only used in errors.
    pub fn parse(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
        let toml_error = |e: toml::de::Error| {
            let message = e.message().trim().to_owned();
            let line = e.span().map(|s| line_of(text, s.start));
            let field = line.and_then(|l| field_at_line(text, l));
            // A flattened table (`[faults_random]`) reports its keys' errors at the table:
            // name the key's own line when the message names the key.
            let key = key_named(&message, field.as_deref());
            let located = key.and_then(|k| Some((locate(text, &k)?, k)));
            let (line, field) = match located {
                Some((l, k)) => (Some(l), Some(k)),
                None => (line, field),
            };
            ScenarioError {
                path: path.into(),
                line,
                field,
                message,
            }
        };
        // Bounds first, on the raw table: they name the field of any number in the file.
        let raw: toml::Table = toml::from_str(text).map_err(toml_error)?;
        if !raw.contains_key("protocol") {
            return Err(ScenarioError {
                path: path.into(),
                line: None,
                field: None,
                message: "missing table [protocol] (the lock protocol and its parameters, e.g. \
                          `[protocol]` with `name = \"single-redis\"`)"
                    .into(),
            });
        }
        // A (field, message) error at the field's line.
        let at_field = |(field, message): (String, String)| ScenarioError {
            path: path.into(),
            line: locate(text, &field),
            field: Some(field),
            message,
        };
        crate::renamed::check(&raw)
            .and_then(|()| crate::bounds::check(&raw))
            .map_err(at_field)?;
        let scenario: Scenario = toml::from_str(text).map_err(toml_error)?;
        scenario.validate().map_err(at_field)?;
        Ok(scenario)
    }

    /// Checks what the types cannot: ranges, and that fault targets exist. Returns the
    /// field's dotted path and the message. (Protocol parameters are checked by
    /// [`Scenario::prepare`].)
    fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_owned(), m));
        if self.duration_ms == 0 {
            return err("duration_ms", "must be positive".into());
        }
        let w = &self.workload;
        if w.clients == 0 {
            return err("workload.clients", "needs at least one client".into());
        }
        if w.cs_ms_min > w.cs_ms_max {
            return err("workload.cs_ms_min", "must not exceed cs_ms_max".into());
        }
        if w.think_ms_min > w.think_ms_max {
            return err(
                "workload.think_ms_min",
                "must not exceed think_ms_max".into(),
            );
        }
        if w.resource_timeout_ms == 0 {
            return err("workload.resource_timeout_ms", "must be positive".into());
        }
        if w.writes_per_cs == 0 {
            // No write, nothing for lost update (or fencing) to judge: "holds" would lie.
            return err(
                "workload.writes_per_cs",
                "must be at least 1 (a critical section without a write checks nothing)".into(),
            );
        }
        self.network
            .validate()
            .or_else(|m| err(&field_of(&m, "network"), m))?;
        self.clocks
            .validate()
            .or_else(|m| err(&field_of(&m, "clocks"), m))?;
        self.disk
            .validate()
            .or_else(|m| err(&field_of(&m, "disk"), m))?;
        self.faults_random
            .validate()
            .or_else(|m| err(&field_of(&m, "faults_random"), m))?;
        if let Some(expect) = &self.expect {
            expect
                .validate()
                .or_else(|(f, m)| err(&format!("expect.{f}"), m))?;
        }
        self.faults_within_the_run()
    }

    /// A scripted fault timed at or after the run's end would never fire, yet count in "N
    /// faults": refused, naming the fault and the duration.
    fn faults_within_the_run(&self) -> Result<(), (String, String)> {
        for (i, fault) in self.faults.iter().enumerate() {
            let Some(at_ms) = fault.at_ms() else { continue };
            if at_ms >= self.duration_ms {
                // The kind as the file spells it (`clock_jump`).
                let value = serde_json::to_value(fault).expect("a fault serialises");
                let kind = value["kind"].as_str().unwrap_or("scripted").to_owned();
                return Err((
                    format!("faults[{i}].at_ms"),
                    format!(
                        "the {kind} fault at {at_ms} ms would never fire: the run ends at \
                         duration_ms = {} ms",
                        self.duration_ms
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Configures the protocol and checks fault targets against the node names.
    pub fn prepare(self, path: &str, registry: &Registry) -> Result<Prepared, ScenarioError> {
        // The file is read again only to name the line of an error.
        let fail = |field: String, message: String| ScenarioError {
            path: path.into(),
            line: locate(&text_of(path), &field),
            field: Some(field),
            message,
        };
        let protocol = registry.get(&self.protocol.name).ok_or_else(|| {
            fail(
                "protocol.name".into(),
                format!(
                    "unknown protocol `{}` (known: {})",
                    self.protocol.name,
                    registry.ids().join(", ")
                ),
            )
        })?;
        let deployment = protocol.configure(&self.protocol.params).map_err(|e| {
            let field = e
                .field
                .as_ref()
                .map_or("protocol".to_owned(), |f| format!("protocol.{f}"));
            fail(field, e.message.clone())
        })?;
        let nodes = node_names(&self, deployment.as_ref());
        let mut targets = nodes.clone();
        targets.extend(fault_roles(deployment.as_ref()));
        let clients = self.workload.client_names();
        for (i, fault) in self.faults.iter().enumerate() {
            fault
                .validate(&targets)
                .and_then(|()| check_point(fault, &clients, deployment.as_ref()))
                .map_err(|m| fail(format!("faults[{i}]"), m))?;
        }
        self.check_node_names(&nodes, &targets)
            .map_err(|(field, message)| fail(field, message))?;
        let text = text_of(path);
        let warnings = self
            .roles_resolved_once()
            .into_iter()
            .map(|(field, message)| {
                let place =
                    locate(&text, &field).map_or(path.to_owned(), |l| format!("{path}:{l}"));
                format!("{place}: {field}: {message}")
            })
            .collect();
        Ok(Prepared {
            scenario: self,
            path: path.into(),
            deployment,
            warnings,
        })
    }

    /// Every node a random profile's lists, a link or the clocks name is one of `nodes` (the
    /// lists may also name a role of `targets` or a group): else the field and the message.
    fn check_node_names(
        &self,
        nodes: &[String],
        targets: &[String],
    ) -> Result<(), (String, String)> {
        for (key, list) in self.faults_random.node_lists() {
            let known = |n: &String| targets.contains(n) || is_group(n);
            if let Some(bad) = list.iter().find(|n| !known(n)) {
                let what = if is_role(bad) { "role" } else { "node" };
                let field = format!("faults_random.{key}");
                return Err((field, format!("unknown {what} `{bad}`")));
            }
        }
        for (i, link) in self.network.links.iter().enumerate() {
            // A link naming no node would silently keep the default latency.
            for (end, name) in [("from", &link.from), ("to", &link.to)] {
                if !nodes.contains(name) {
                    return Err((
                        format!("network.links[{i}].{end}"),
                        format!("unknown node `{name}` (nodes: {})", nodes.join(", ")),
                    ));
                }
            }
        }
        if let Some(bad) = self.clocks.nodes.keys().find(|n| !nodes.contains(n)) {
            return Err((
                format!("clocks.nodes.{bad}"),
                format!("unknown node `{bad}`"),
            ));
        }
        Ok(())
    }

    /// A role as the `node` of a repeating fault (`pause_periodic`) is resolved once, when
    /// its first pause starts, and every later pause stops that same node: documented, and
    /// still read as "whoever has the role at each pause", which is `targets`. The field and
    /// the warning, for each such fault (and a random profile drawing them).
    fn roles_resolved_once(&self) -> Vec<(String, String)> {
        let once = |role: &str| is_role(role) && !is_group(role);
        let why = |role: &str| {
            format!(
                "the role `{role}` of a repeating fault is resolved once, when its first pause \
                 starts, and every pause stops that node even after `{role}` moved on; \
                 `targets = [\"{role}\"]` resolves it again at each pause"
            )
        };
        let mut out = Vec::new();
        for (i, fault) in self.faults.iter().enumerate() {
            if let Fault::PausePeriodic(f) = fault {
                if once(&f.node) {
                    out.push((format!("faults[{i}].node"), why(&f.node)));
                }
            }
        }
        let random = &self.faults_random.pause_periodic.pause_periodic_nodes;
        if let Some(role) = random.iter().find(|n| once(n)) {
            let field = "faults_random.pause_periodic_nodes".to_owned();
            out.push((field, why(role)));
        }
        out
    }
}

/// A fault at a named point must name a point that node's code passes (a typo would
/// otherwise silently never fire).
fn check_point(
    fault: &Fault,
    clients: &[String],
    deployment: &dyn Deployment,
) -> Result<(), String> {
    let Some(ArmedPoint { node, point, .. }) = fault.armed_point() else {
        return Ok(());
    };
    let (node, point) = (&node, &point);
    let role = if clients.contains(node) {
        "client"
    } else {
        node.as_str()
    };
    let mut known: Vec<&str> = deployment
        .points()
        .into_iter()
        .filter(|(n, _)| n == role)
        .map(|(_, p)| p)
        .collect();
    if role == "client" {
        known.extend(crate::workload::POINTS);
    }
    if known.contains(&point.as_str()) {
        return Ok(());
    }
    Err(format!(
        "node `{node}` has no point `{point}` (its points: {})",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    ))
}

/// The roles a fault may name in a scenario with this deployment: the deployment's own
/// (e.g. `@primary`) and the workload's `@holder`.
pub fn fault_roles(deployment: &dyn Deployment) -> Vec<String> {
    let mut roles: Vec<String> = deployment.roles().into_iter().map(String::from).collect();
    roles.push(ROLE_HOLDER.into());
    roles
}

/// Every node name of a scenario: servers, then clients, then the resource.
pub fn node_names(scenario: &Scenario, deployment: &dyn Deployment) -> Vec<String> {
    let mut names = deployment.servers();
    names.extend(scenario.workload.client_names());
    names.push(locksim_protocols::resource::RESOURCE.into());
    names
}

/// The key a serde message names: a dotted field it starts with, or an unknown field of
/// `table`.
fn key_named(message: &str, table: Option<&str>) -> Option<String> {
    let first = message.split_whitespace().next()?;
    if first.contains('.') && !first.ends_with('.') {
        return Some(first.to_owned());
    }
    let unknown = message.strip_prefix("unknown field `")?.split('`').next()?;
    // The field of the key's own line already ends in the key (`workload.check_validity`).
    let table = table?;
    if table == unknown || table.ends_with(&format!(".{unknown}")) {
        return Some(table.to_owned());
    }
    Some(format!("{table}.{unknown}"))
}

/// The dotted field a validation message starts with (`network.loss_probability must...`).
fn field_of(message: &str, section: &str) -> String {
    message
        .split_whitespace()
        .next()
        .filter(|w| w.starts_with(section))
        .map_or_else(
            || section.to_owned(),
            |w| w.trim_end_matches(':').to_owned(),
        )
}

/// The dotted field written on a 1-based line (`workload.clients`, `faults[1].node`): the
/// line's key under the nearest table header above it, or the table a header line opens.
/// `None` for a line with neither.
pub fn field_at_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut arrays: BTreeMap<&str, usize> = BTreeMap::new();
    let mut table = String::new();
    for l in lines.get(..line)? {
        let l = l.trim();
        if let Some((name, _)) = l.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
            let n = arrays.entry(name.trim()).or_insert(0);
            table = format!("{}[{}]", name.trim(), *n);
            *n += 1;
        } else if let Some((name, _)) = l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            table = name.trim().to_owned();
        }
    }
    let here = lines[line.checked_sub(1)?].trim();
    if here.starts_with('[') {
        return (!table.is_empty()).then_some(table);
    }
    let key = here.split_once('=')?.0.trim();
    if key.is_empty() {
        return None;
    }
    Some(if table.is_empty() {
        key.to_owned()
    } else {
        format!("{table}.{key}")
    })
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line where a dotted field (`network.loss_probability`, `faults[2].node`,
/// `protocol.ttl_ms`) is written, or its nearest written parent.
pub fn locate(text: &str, field: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let line = |span: Option<std::ops::Range<usize>>| span.map(|s| line_of(text, s.start));
    let mut best = None;
    let mut table: &dyn toml_edit::TableLike = doc.as_table();
    for part in field.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some((key, item)) = table.get_key_value(name) else {
            return best;
        };
        best = line(key.span()).or(best);
        let next: Option<&dyn toml_edit::TableLike> = match index {
            Some(i) => {
                let element = item.as_array_of_tables().and_then(|a| a.get(i));
                best = line(element.and_then(|t| t.span())).or(best);
                element.map(|t| t as &dyn toml_edit::TableLike)
            }
            None => item.as_table_like(),
        };
        match next {
            Some(t) => table = t,
            None => return best,
        }
    }
    best
}

/// A tally of per-property verdicts (for reports).
pub type PropertyCounts = BTreeMap<Property, u64>;
