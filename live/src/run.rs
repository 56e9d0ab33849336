//! One live run: start the servers and the resource, start one client process per client,
//! apply the fault schedule with signals, stop everything at the end, merge the history and
//! check it with the simulator's checker.

use crate::client::driver::{self, SharedDriver};
use crate::clock;
use crate::deploy::servers::Server;
use crate::deploy::{self, Deployment, ServerInfo};
use crate::history::Recorder;
use crate::procs::Proc;
use crate::proxy::{CutMode, Delays, Dir, LossPlan, Proxy};
use crate::refuse::Cuts;
use crate::rundir::RunDir;
use crate::spec::{ClientMsg, ClientSpec};
use locksim_check::{Event, History, Kind, Op};
use locksim_protocols::resource::RESOURCE;
use locksim_scenarios::Prepared;
use locksim_sim::fault::pause_periodic::{Cycle, PausePlan};
use locksim_sim::fault::Partition;
use locksim_sim::nemesis::ROLE_HOLDER;
use locksim_sim::nodes::{ArmedPoint, PointAction};
use locksim_sim::Fault;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

/// How a live run is started.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The seed (the clients' random draws and the random fault profile derive from it).
    pub seed: u64,
    /// Keep the servers' data and logs here (else a temporary directory, removed).
    pub keep: Option<PathBuf>,
    /// The `locksim` binary, started with `live-client SPEC` for each client.
    pub exe: PathBuf,
    /// How a partition cuts a link (stall, as the simulator does, or reset).
    pub cut_mode: CutMode,
    /// Run the client profile's real library behind its driver ([`crate::client::driver`]), not
    /// locksim's own client.
    pub library: bool,
}

/// What a live run produced.
pub struct LiveRun {
    /// The merged history.
    pub history: History,
    /// Each server and its version.
    pub servers: Vec<ServerInfo>,
    /// Wall time of the workload phase, in ms.
    pub run_ms: u64,
    /// Faults in the schedule.
    pub faults: u64,
    /// The real library the clients ran (`--library`): its profile, version and driver.
    pub library: Option<LibraryInfo>,
    /// The servers' fsyncs from the clients' start to the run's end ([`Deployment::fsyncs`]):
    /// the clients' set-up counts, as in the simulator; None where one did not answer, or an
    /// etcd or ZooKeeper server crashed (a restarted one counts from zero).
    pub server_fsyncs: Option<u64>,
}

/// A real client library a live run used.
#[derive(Clone, Debug)]
pub struct LibraryInfo {
    /// The client profile it is the real counterpart of.
    pub profile: String,
    /// The installed version.
    pub version: String,
    /// The driver's path in the repository.
    pub driver: String,
}

enum Action {
    Fault(Fault),
    /// A cycle of a periodic pause starts (`why` in words).
    Cycle {
        cycle: Cycle,
        why: String,
    },
    Heal {
        links: Cuts,
    },
    /// A delay spike's end: its links move on.
    Flush {
        links: Cuts,
        node: String,
        detail: String,
    },
    /// A loss window's end, unless a later one (a higher epoch) replaced it.
    LossOver {
        epoch: u64,
    },
    Resume {
        node: String,
        epoch: u64,
    },
    Restart {
        node: String,
    },
}

#[derive(Default)]
struct ClientProc {
    proc: Option<Proc>,
    /// Its stdin until it is told to start (`Live::release`).
    go: Option<std::process::ChildStdin>,
    incarnation: u32,
    grants: u64,
    /// Passages of its armed points' points so far, over its incarnations.
    passages: BTreeMap<String, u32>,
}

/// A run in progress: the parent's state.
struct Live<'a> {
    prepared: &'a Prepared,
    opts: &'a LiveOptions,
    dir: PathBuf,
    recorder: Recorder,
    deployment: Deployment,
    resource: String,
    clients: BTreeMap<String, ClientProc>,
    holders: Vec<String>,
    paused: BTreeMap<String, (u64, u64)>,
    timers: BTreeMap<(u64, u64), Action>,
    timer_seq: u64,
    end_ns: u64,
    tx: Sender<(String, u32, ClientMsg)>,
    /// The proxy on each (client, server or resource) link.
    proxies: BTreeMap<(String, String), Proxy>,
    /// Whether the clients were told the run has started.
    started: bool,
    /// The plans of the periodic pauses not started yet ([`faults::pause_plans`]).
    pause_plans: Vec<PausePlan>,
    /// The run's loss, which every proxy applies (`None`: nothing is ever lost).
    loss: Option<Arc<LossPlan>>,
    /// Loss windows started so far (the latest one is in force).
    loss_epoch: u64,
    /// The real library the clients run (`--library`).
    library: Option<LibraryInfo>,
    /// The faults armed at the clients' named points (every incarnation gets its own).
    armed: Vec<ArmedPoint>,
    /// The nodes' shims (`deploy::shim`): their clocks and fsyncs, if the run needs them.
    shims: BTreeMap<String, crate::deploy::shim::NodeShim>,
    /// The library's one driver, whose threads the clients are (`redis-py-shared-token`).
    shared_driver: Option<SharedDriver>,
    /// The servers' fsync counters before the clients started ([`Deployment::fsyncs`]); None
    /// once a server whose count restarts from zero crashed.
    fsyncs_at_start: Option<u64>,
}

mod faults;
pub use faults::pause_plans;
mod wire;

/// How long after every client said it is up the run starts (time to act on the faults due
/// at 0 and tell each client the start): they wait for it.
const START_MARGIN_MS: u64 = 100;

/// How long locksim's own client processes may take to come up before the run fails: a
/// bound, not an allowance (the run starts as soon as they are all up). Spawned beside a
/// browser, JVMs and a build, two clients had not taken the lock 1 s after a start fixed at
/// 500 ms after their spawn.
const OWN_CLIENT_START_MS: u64 = 30_000;

/// Runs `prepared` live. Every process it starts is gone when it returns (or unwinds).
pub fn run(prepared: &Prepared, opts: &LiveOptions) -> anyhow::Result<LiveRun> {
    clock::assert_real();
    crate::refuse::check(prepared, opts.seed, opts.cut_mode, opts.library)?;
    let library = real_library(prepared, opts)?;
    crate::procs::install_signal_handlers();
    let (dir, _temp) = run_dir(opts)?;
    crate::procs::log_pids_to(dir.join("pids.txt"));
    let faults = prepared.faults_for(opts.seed);
    // Before any server starts: it may simulate the seed first.
    let pause_plans = faults::pause_plans(prepared, opts.seed)?;
    let mut deployment = deploy::plan(prepared, &dir, opts.seed)?;
    let shims = deploy::shim::attach(prepared, &faults, &mut deployment, &dir, opts.library)?;
    start_servers(&mut deployment)?;
    let s = &prepared.scenario;
    // A provisional zero: the clock starts when every client is up (`start_clock`).
    let recorder = Recorder::new(clock::now_ns() + START_MARGIN_MS * 1_000_000);
    let resource = crate::resource::start(s.resource.rules(), &dir, recorder.clone())?;
    let shared_driver = shared_driver(&library, &deployment.lock)?;
    // Before any client starts: a real library's set-up (a session, the lock's directory,
    // made before its driver says hello) counts, as every client's does in the simulator.
    let fsyncs_at_start = deployment.fsyncs();
    let (tx, rx) = channel();
    let mut live = Live {
        prepared,
        opts,
        dir,
        recorder,
        deployment,
        resource: resource.to_string(),
        clients: BTreeMap::new(),
        holders: vec![],
        paused: BTreeMap::new(),
        timers: BTreeMap::new(),
        timer_seq: 0,
        end_ns: 0,
        tx,
        proxies: BTreeMap::new(),
        started: false,
        pause_plans,
        loss: None,
        loss_epoch: 0,
        library,
        armed: faults.iter().filter_map(Fault::armed_point).collect(),
        shims,
        shared_driver,
        fsyncs_at_start,
    };
    for name in s.workload.client_names() {
        live.start_client(&name)?;
    }
    let start_ns = live.start_clock(&faults, &rx)?;
    live.main_loop(&rx, start_ns + s.duration_ms * 1_000_000)?;
    if s.heal_ms > 0 {
        live.heal_all();
        live.main_loop(&rx, live.end_ns)?;
    }
    let run_ms = clock::since(start_ns).as_millis() as u64;
    Ok(live.finish(&rx, run_ms, faults.len() as u64))
}

/// With `--library`, the real library of the scenario's client profile (the parent checked
/// that it has a driver): its version, asked before anything starts.
fn real_library(prepared: &Prepared, opts: &LiveOptions) -> anyhow::Result<Option<LibraryInfo>> {
    if !opts.library {
        return Ok(None);
    }
    let (_, driver) = crate::client::driver::of_scenario(&prepared.scenario);
    let driver = driver.expect("refuse::check refuses a profile without a driver");
    Ok(Some(LibraryInfo {
        profile: driver.profile.into(),
        version: driver.version()?,
        driver: driver.path.into(),
    }))
}

/// With `--library`, the run's one driver process if the library's clients are its threads
/// ([`crate::client::driver::Driver::threads`]), on the servers themselves (each client's
/// thread reaches them through its own link's proxy).
fn shared_driver(
    library: &Option<LibraryInfo>,
    lock: &crate::spec::LockSpec,
) -> anyhow::Result<Option<SharedDriver>> {
    let driver = library.as_ref().and_then(|l| driver::named(&l.profile));
    match driver {
        Some(d) if d.threads => Ok(Some(SharedDriver::start(d, lock)?)),
        _ => Ok(None),
    }
}

/// How long the clients may take to come up before the run fails (with `--library`, its
/// drivers: a JVM takes seconds): a bound; the run's clock starts as soon as they are all up.
fn client_start_ms(library: &Option<LibraryInfo>) -> u64 {
    let driver = |l: &LibraryInfo| crate::client::driver::named(&l.profile).map(|d| d.start_ms());
    library
        .as_ref()
        .and_then(driver)
        .unwrap_or(OWN_CLIENT_START_MS)
}

/// Starts every server and waits until each is ready: first those that need no other,
/// then the rest (Sentinels, once the nodes they watch are in sync).
fn start_servers(deployment: &mut Deployment) -> anyhow::Result<()> {
    for later in [false, true] {
        let servers = deployment.servers.iter_mut();
        let mut wave: Vec<_> = servers.filter(|s| s.after_others == later).collect();
        wave.sort_by_key(|s| s.start_after_ms);
        let wave_ns = clock::now_ns();
        for server in &mut wave {
            let due = Duration::from_millis(server.start_after_ms);
            clock::sleep(due.saturating_sub(clock::since(wave_ns)));
            server.spawn()?;
        }
        crate::deploy::servers::wait_all_ready(&mut wave)?;
    }
    clock::sleep(Duration::from_millis(deployment.settle_ms));
    if deployment.infos.is_empty() {
        // ZooKeeper tells its version only once it runs.
        deployment.infos = crate::deploy::zookeeper::infos(&deployment.client_addrs);
    }
    Ok(())
}

/// The run's directory: `--keep DIR` (kept), or a fresh temporary one (removed at the end,
/// on a signal, or by a later run if this process is killed: [`RunDir`]).
fn run_dir(opts: &LiveOptions) -> anyhow::Result<(PathBuf, Option<RunDir>)> {
    if let Some(keep) = &opts.keep {
        std::fs::create_dir_all(keep)?;
        return Ok((keep.clone(), None));
    }
    let temp = RunDir::create()?;
    Ok((temp.path().to_path_buf(), Some(temp)))
}

/// Cut links in words: `c1-redis` both ways, `c1->redis` or `c1<-redis` one way, and
/// `redis1->redis2` for traffic between servers.
fn show(links: &Cuts) -> String {
    let clients = links.clients.iter().map(|(a, b, dir)| match dir {
        None => format!("{a}-{b}"),
        Some(Dir::Up) => format!("{a}->{b}"),
        Some(Dir::Down) => format!("{a}<-{b}"),
    });
    let servers = links.servers.iter().map(|(a, b)| format!("{a}->{b}"));
    clients.chain(servers).collect::<Vec<_>>().join(", ")
}

impl Live<'_> {
    /// Ends the run: stops the clients (first: every event they stamped comes before the
    /// end), records its end and kills the servers.
    fn finish(
        mut self,
        rx: &Receiver<(String, u32, ClientMsg)>,
        run_ms: u64,
        faults: u64,
    ) -> LiveRun {
        self.stop_clients(rx);
        self.recorder.record(Event::nemesis(Op::RunEnd));
        let server_fsyncs =
            (self.fsyncs_at_start).and_then(|start| self.deployment.fsyncs()?.checked_sub(start));
        let servers = self.deployment.infos.clone();
        for server in &mut self.deployment.servers {
            server.kill();
        }
        LiveRun {
            history: self.recorder.history(),
            servers,
            run_ms,
            faults,
            library: self.library,
            server_fsyncs,
        }
    }

    fn at(&mut self, at_ns: u64, action: Action) {
        self.timer_seq += 1;
        self.timers.insert((at_ns, self.timer_seq), action);
    }

    fn fault_event(&self, op: Op, target: &str) -> Event {
        Event::nemesis(op).target(target)
    }

    /// A note of the nemesis on the timeline.
    fn note(&self, detail: String) {
        let note = Event::nemesis(Op::Note).detail(detail);
        self.recorder.record(note);
    }

    /// Starts (or restarts) client `name`, with a reader thread forwarding its lines.
    fn start_client(&mut self, name: &str) -> anyhow::Result<()> {
        self.clients.entry(name.to_owned()).or_default();
        let (lock, resource) = self.proxied(name)?;
        let s = &self.prepared.scenario;
        let entry = self.clients.get_mut(name).expect("inserted above");
        let spec = ClientSpec {
            name: name.into(),
            nodes: self.prepared.node_table(),
            seed: self.opts.seed,
            incarnation: entry.incarnation,
            grants_before: entry.grants,
            workload: s.workload.clone(),
            lock,
            resource,
            stops: self
                .armed
                .iter()
                .filter(|p| p.node == name)
                .cloned()
                .collect(),
            passages_before: entry.passages.clone(),
            driver: self.library.as_ref().map(|l| l.profile.clone()),
            driver_at: self.shared_driver.as_ref().map(|d| d.addr.clone()),
            clock: self.shims.get(name).map(|c| c.path().to_owned()),
        };
        let spec_file = self.dir.join(format!("{name}.{}.json", entry.incarnation));
        // Whole or not at all, for whoever reads the kept run directory meanwhile.
        let partial = spec_file.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_string_pretty(&spec)?)?;
        std::fs::rename(&partial, &spec_file)?;
        let log = crate::procs::append_to(&self.dir.join(format!("{name}.log")))?;
        let mut cmd = Command::new(&self.opts.exe);
        cmd.arg("live-client")
            .arg(&spec_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut proc = Proc::spawn(name, &mut cmd)?;
        let stdout = proc.take_stdout().expect("stdout is piped");
        entry.go = proc.take_stdin();
        let (tx, who, incarnation) = (self.tx.clone(), name.to_owned(), entry.incarnation);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                match serde_json::from_str::<ClientMsg>(&line) {
                    Ok(msg) => {
                        if tx.send((who.clone(), incarnation, msg)).is_err() {
                            break;
                        }
                    }
                    Err(e) => eprintln!("locksim: {who}: bad line from the client ({e}): {line}"),
                }
            }
        });
        entry.proc = Some(proc);
        entry.incarnation += 1;
        if self.started {
            self.release();
        }
        Ok(())
    }

    /// Starts the run's clock once every client is up (with `--library`, its driver): a
    /// condition, not a fixed allowance (a JVM compiling its driver took more than 10 s with
    /// other tests beside it; locksim's own clients, more than 1 s beside a browser). The clients are spawned before the start and
    /// wait for it, and the faults due at 0 act before it (`fire_due`), as in the
    /// simulator, where a fault at 0 precedes every client step: spawned one by one, a client
    /// ran before a partition or pause at 0 took effect (under load, for tens of ms:
    /// Redlock's first grant then reached all five masters). They start only when told
    /// (`release`): a slow spawn cannot put them ahead of those. Returns the run's zero.
    fn start_clock(
        &mut self,
        faults: &[Fault],
        rx: &Receiver<(String, u32, ClientMsg)>,
    ) -> anyhow::Result<u64> {
        self.await_clients(rx)?;
        let start_ns = clock::now_ns() + START_MARGIN_MS * 1_000_000;
        self.recorder.set_start(start_ns);
        let s = &self.prepared.scenario;
        self.end_ns = start_ns + (s.duration_ms + s.heal_ms) * 1_000_000;
        self.loss = wire::loss_plan(self.prepared, faults, start_ns, &self.deployment);
        // The client links' proxies, made when the clients were spawned, lose by it too.
        if let Some(plan) = &self.loss {
            self.proxies.values().for_each(|p| p.lose(plan.clone()));
        }
        for fault in faults.iter().filter(|f| f.at_ms().is_some()) {
            let at_ns = start_ns + fault.at_ms().unwrap_or(0) * 1_000_000;
            self.at(at_ns, Action::Fault(fault.clone()));
        }
        crate::deploy::shim::start_drifts(self.prepared, &mut self.shims)?;
        self.fire_due(start_ns);
        self.release();
        Ok(start_ns)
    }

    /// Waits until every client has said it is up (with `--library`, once its driver said
    /// hello), so that neither the workload nor a fault begins while a client is still
    /// starting; one not up within its bound ([`client_start_ms`]) fails the run.
    fn await_clients(&mut self, rx: &Receiver<(String, u32, ClientMsg)>) -> anyhow::Result<()> {
        let mut waiting: std::collections::BTreeSet<String> =
            self.clients.keys().cloned().collect();
        let bound_ms = client_start_ms(&self.library);
        let deadline_ns = clock::now_ns() + bound_ms * 1_000_000;
        while !waiting.is_empty() {
            self.check_clients()?;
            let left = deadline_ns.saturating_sub(clock::now_ns());
            if left == 0 {
                let (what, since) = match self.library {
                    Some(_) => ("the real library of", "its start"),
                    None => ("client", "their spawn"),
                };
                let who = waiting.into_iter().collect::<Vec<_>>().join(", ");
                anyhow::bail!("{what} {who} not up {bound_ms} ms after {since}");
            }
            let wait = Duration::from_nanos(left).min(Duration::from_millis(20));
            match rx.recv_timeout(wait) {
                Ok((who, _, ClientMsg::Ready)) => {
                    waiting.remove(&who);
                }
                Ok((who, incarnation, msg)) => self.on_message(&who, incarnation, msg),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Tells every client waiting for it that the run has started ([`crate::spec::Go`]):
    /// only after the faults due at 0 acted, however long spawning the clients took.
    fn release(&mut self) {
        self.started = true;
        let word = crate::spec::Go {
            start_ns: self.recorder.start_ns(),
            end_ns: self.end_ns,
        };
        for (name, c) in &mut self.clients {
            if let Some(mut go) = c.go.take() {
                if let Err(e) = go.write_all(&word.to_bytes()) {
                    eprintln!("locksim: {name}: could not tell it to start ({e})");
                }
            }
        }
    }

    /// A client process that failed (it runs until the end unless killed): the run is
    /// broken, and its log says why.
    fn check_clients(&mut self) -> anyhow::Result<()> {
        for (name, c) in &mut self.clients {
            if c.proc.as_mut().is_some_and(|p| p.failed()) {
                let log = crate::deploy::servers::tail(&self.dir.join(format!("{name}.log")), 10);
                anyhow::bail!("client {name} exited during the run; its log ends:\n{log}");
            }
        }
        Ok(())
    }

    /// The lock spec and resource address for client `name`, each link through a proxy of
    /// its own (made at its first start).
    fn proxied(&mut self, name: &str) -> anyhow::Result<(crate::spec::LockSpec, String)> {
        let mut lock = self.deployment.lock.clone();
        let mut resource = self.resource.clone();
        let servers = self.deployment.client_addrs.iter().map(|(n, _)| n.clone());
        let nodes: Vec<String> = servers.chain([RESOURCE.to_owned()]).collect();
        let slots = lock.addrs_mut().into_iter().chain([&mut resource]);
        for (node, slot) in nodes.into_iter().zip(slots) {
            *slot = self.proxy(name, node, slot)?.addr.to_string();
        }
        Ok((lock, resource))
    }

    /// The proxy on the link from client `name` to `node` at `addr`, made if it is new.
    fn proxy(&mut self, name: &str, node: String, addr: &str) -> anyhow::Result<&Proxy> {
        let seed = self.opts.seed ^ (self.proxies.len() as u64 + 1) << 32;
        match self.proxies.entry((name.to_owned(), node)) {
            Entry::Occupied(known) => Ok(known.into_mut()),
            Entry::Vacant(new) => {
                let net = &self.prepared.scenario.network;
                let delays = Delays::of(net, name, &new.key().1, seed);
                let proxy = Proxy::with_delays(addr.parse()?, delays)?;
                self.loss.iter().for_each(|plan| proxy.lose(plan.clone()));
                Ok(new.insert(proxy))
            }
        }
    }

    /// Fires every timer due by `t_ns` (which may be in the future: the faults at 0).
    fn fire_due(&mut self, t_ns: u64) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > t_ns {
                break;
            }
            let action = entry.remove();
            self.fire(action);
        }
    }

    /// When a fault acts, for timing its end: now, or the run's start for one fired before it.
    fn fault_now(&self) -> u64 {
        clock::now_ns().max(self.recorder.start_ns())
    }

    fn main_loop(
        &mut self,
        rx: &Receiver<(String, u32, ClientMsg)>,
        until_ns: u64,
    ) -> anyhow::Result<()> {
        loop {
            let now = clock::now_ns();
            if now >= until_ns {
                return Ok(());
            }
            self.check_clients()?;
            self.fire_due(now);
            let next = self
                .timers
                .keys()
                .next()
                .map_or(until_ns, |k| k.0)
                .min(until_ns);
            let wait = Duration::from_nanos(next.saturating_sub(clock::now_ns()))
                .min(Duration::from_millis(20));
            if let Ok((who, incarnation, msg)) = rx.recv_timeout(wait) {
                self.on_message(&who, incarnation, msg);
            }
        }
    }

    fn on_message(&mut self, who: &str, incarnation: u32, msg: ClientMsg) {
        // Lines of an earlier incarnation may still arrive after a restart.
        let current = self
            .clients
            .get(who)
            .is_some_and(|c| c.incarnation == incarnation + 1);
        match msg {
            ClientMsg::Event(event) => {
                if current {
                    self.track_holder(who, &event);
                }
                self.recorder.push_stamped(event);
            }
            ClientMsg::Stop(stop) => {
                self.passed(who, &stop.point);
                if current {
                    self.stop_at_point(who, stop);
                }
            }
            // Counted whatever the incarnation: it passed there.
            ClientMsg::Passed(point) => self.passed(who, &point),
            ClientMsg::Ready => {}
        }
    }

    fn passed(&mut self, who: &str, point: &str) {
        if let Some(c) = self.clients.get_mut(who) {
            *c.passages.entry(point.to_owned()).or_default() += 1;
        }
    }

    fn track_holder(&mut self, who: &str, event: &Event) {
        match (event.op.clone(), event.kind) {
            (Op::CsEnter, Kind::Ok) => self.holders.push(who.to_owned()),
            (Op::CsExit, _) => self.holders.retain(|h| h != who),
            (Op::Acquire, Kind::Ok) => {
                if let Some(c) = self.clients.get_mut(who) {
                    c.grants += 1;
                }
            }
            _ => {}
        }
    }
}

/// The nemesis: faults by signals.
impl Live<'_> {
    fn fire(&mut self, action: Action) {
        match action {
            Action::Fault(fault) => self.apply(fault),
            Action::Cycle { cycle, why } => self.pause_cycle(&cycle, &why),
            Action::Resume { node, epoch } => self.resume(&node, Some(epoch)),
            Action::Restart { node } => self.restart(&node),
            Action::Heal { links } => self.heal(&links),
            Action::Flush {
                links,
                node,
                detail,
            } => self.flush(&links, &node, detail),
            Action::LossOver { epoch } => self.loss_over(epoch),
        }
    }

    /// The node a role (`@holder`, `@leader`, ...) names now; a node or a group (`@servers`)
    /// stays a name, for the kinds that take groups.
    fn resolve(&self, node: &str) -> Option<String> {
        match node {
            ROLE_HOLDER => self.holders.first().cloned(),
            _ if locksim_sim::nemesis::resolvable(node) => self.deployment.resolve_role(node),
            _ => Some(node.to_owned()),
        }
    }

    /// Applies `fault` now, its roles resolved as the simulator resolves them.
    fn apply(&mut self, fault: Fault) {
        let (concrete, why) = match locksim_sim::nemesis::resolve(&fault, |r| self.resolve(r)) {
            Ok(resolved) => resolved,
            Err(skipped) => return self.note(skipped),
        };
        // A kind live mode cannot apply was refused before the run (`refuse::check`, from
        // the same definition); should one come here, it is skipped by name, with the reason.
        let nemesis: &mut dyn crate::nemesis::Nemesis = self;
        if let Err(cannot) = concrete.apply_in(nemesis, &why) {
            self.note(format!("{:?} skipped: {cannot}", fault.kind()));
        }
    }

    fn proc_of(&self, node: &str) -> Option<&Proc> {
        match self.clients.get(node) {
            Some(c) => c.proc.as_ref(),
            None => self
                .deployment
                .servers
                .iter()
                .find(|s| s.name == node)
                .and_then(|s| s.proc()),
        }
    }

    /// SIGSTOP to the node's group for `duration_ms` (a longer pause already on wins).
    fn pause(&mut self, node: &str, duration_ms: u64, why: &str) {
        let until = self.fault_now() + duration_ms * 1_000_000;
        let Some(proc) = self.proc_of(node) else {
            return;
        };
        let epoch = match self.paused.get(node) {
            Some((u, _)) if *u >= until => return,
            Some((_, e)) => e + 1,
            None => 1,
        };
        proc.signal(libc::SIGSTOP);
        self.stopped(node, (until, epoch), duration_ms, why);
    }

    /// `node` is stopped until `until` (its `epoch`-th pause): recorded, its resume scheduled.
    fn stopped(&mut self, node: &str, (until, epoch): (u64, u64), duration_ms: u64, why: &str) {
        self.paused.insert(node.to_owned(), (until, epoch));
        let event = self.fault_event(Op::Pause, node).value(duration_ms as i64);
        self.recorder.record(event.detail(why));
        let node = node.to_owned();
        self.at(until, Action::Resume { node, epoch });
    }

    fn resume(&mut self, node: &str, epoch: Option<u64>) {
        let current = |(_, e): &(u64, u64)| epoch.is_none_or(|x| x == *e);
        if !self.paused.get(node).is_some_and(current) {
            return;
        }
        self.paused.remove(node);
        if let Some(proc) = self.proc_of(node) {
            // Stamped before the signal: the resumed process's next event comes after its
            // resume in the history (stamped after, a client's event once came 0.1 ms before
            // it).
            self.recorder.record(self.fault_event(Op::Resume, node));
            proc.signal(libc::SIGCONT);
        }
    }

    /// A client stopped itself at a named point: a pause resumes it later, a crash kills it.
    fn stop_at_point(&mut self, who: &str, stop: ArmedPoint) {
        // The client sent the line, then raised SIGSTOP: wait for it to take effect, so the
        // pause is measured from the stop and a SIGCONT cannot come first.
        let start_ns = clock::now_ns();
        while self.proc_of(who).is_some_and(|p| !p.is_stopped())
            && clock::since(start_ns) < Duration::from_secs(2)
        {
            clock::sleep(Duration::from_micros(200));
        }
        let why = format!("at {} (passage {})", stop.point, stop.occurrence);
        let ms = |d: Duration| d.as_millis() as u64;
        match stop.action {
            PointAction::Hold(d, to) => self.spike_at_point(who, (ms(d), &to), &why, start_ns),
            PointAction::Crash(restart) => self.crash(who, restart.map(ms), &why),
            PointAction::Pause(d) => {
                let until = self.fault_now() + ms(d) * 1_000_000;
                let epoch = self.paused.get(who).map_or(1, |(_, e)| e + 1);
                self.stopped(who, (until, epoch), ms(d), &why);
            }
        }
    }

    /// Cuts every client link `fault` separates (through the proxies) for `duration_ms`.
    fn partition(&mut self, partition: &Partition) {
        let duration_ms = partition.duration_ms;
        let clients = self.prepared.scenario.workload.client_names();
        let servers = self.prepared.deployment.servers();
        let (mode, protocol) = (self.opts.cut_mode, &self.prepared.scenario.protocol.name);
        let links = crate::refuse::partition_links(partition, &clients, &servers, mode, protocol)
            .expect("checked before the run");
        self.switch(&links, Some(mode));
        let detail = format!("{mode:?}: {}", show(&links)).to_lowercase();
        let event = Event::nemesis(Op::Partition)
            .value(duration_ms as i64)
            .detail(detail.clone());
        self.recorder.record(event);
        self.at(
            self.fault_now() + duration_ms * 1_000_000,
            Action::Heal { links },
        );
    }

    fn heal(&mut self, links: &Cuts) {
        self.switch(links, None);
        self.recorder
            .record(Event::nemesis(Op::Heal).detail(show(links)));
    }

    /// Cuts (`Some` way) or heals (`None`) every proxy direction `links` names: a client's
    /// link whole, and between servers one sender's connections.
    pub(super) fn switch(&self, links: &Cuts, cut: Option<CutMode>) {
        let f = |p: &Proxy, from: Option<&str>, dir| match cut {
            Some(mode) => p.cut_from(from, mode, dir),
            None => p.heal_from(from, dir),
        };
        for (a, b, dir) in &links.clients {
            if let Some(p) = self.proxies.get(&(a.clone(), b.clone())) {
                f(p, None, *dir);
            }
        }
        let peers = &self.deployment.peer_proxies;
        for (a, b) in &links.servers {
            let at = |n: &str| {
                peers
                    .get(n)
                    .unwrap_or_else(|| panic!("no proxy in front of {n}: refused before"))
            };
            // What `a` sends `b` goes up the connections `a` opens to `b` (requests, etcd's
            // pipeline) and down those `b` opens to `a` (answers, etcd's streams, which the
            // receiving member opens to the sending one; ZooKeeper's election connections go
            // from the higher server id to the lower).
            for p in at(b) {
                f(p, Some(a), Some(Dir::Up));
            }
            for p in at(a) {
                f(p, Some(b), Some(Dir::Down));
            }
        }
    }

    /// SIGKILL; a restart after `restart_after_ms` if given.
    fn crash(&mut self, node: &str, restart_after_ms: Option<u64>, why: &str) {
        // Stamped before the SIGKILL: what the others see of it (a connection gone) comes
        // after it in the history, as in the simulator, however soon they see it.
        let at_ns = clock::now_ns();
        let (killed, lost) = match self.clients.get_mut(node) {
            Some(c) => (c.proc.take().map(Proc::kill).is_some(), vec![]),
            None => (self.deployment.server_mut(node)).map_or((false, vec![]), Server::crash),
        };
        if !killed {
            return;
        }
        if !lost.is_empty() {
            self.note(format!("{node} lost power: {}", lost.join("; ")));
        }
        if !self.clients.contains_key(node) && self.deployment.fsyncs_restart_from_zero() {
            self.fsyncs_at_start = None;
        }
        self.paused.remove(node);
        self.holders.retain(|h| h != node);
        let mut event = self.fault_event(Op::Crash, node).detail(why);
        if let Some(ms) = restart_after_ms {
            event = event.value(ms as i64);
            let delay_ms = match self.clients.contains_key(node) {
                true => 0,
                false => self.deployment.lock.restart_delay_ms(),
            };
            self.at(
                self.fault_now() + (ms + delay_ms) * 1_000_000,
                Action::Restart {
                    node: node.to_owned(),
                },
            );
        }
        self.recorder.record_at(at_ns, event);
    }

    fn restart(&mut self, node: &str) {
        let started = if self.clients.contains_key(node) {
            let alive = self.clients.get(node).is_some_and(|c| c.proc.is_some());
            !alive && self.start_client(node).is_ok()
        } else {
            match self.deployment.server_mut(node) {
                Some(s) if !s.running() => s.spawn().is_ok(),
                _ => false,
            }
        };
        if started {
            self.recorder.record(self.fault_event(Op::Restart, node));
        }
    }

    /// The liveness phase: every paused node resumes, every crashed one restarts.
    fn heal_all(&mut self) {
        let paused: Vec<String> = self.paused.keys().cloned().collect();
        for node in paused {
            self.resume(&node, None);
        }
        let clients = self.clients.iter().filter(|(_, c)| c.proc.is_none());
        let servers = self.deployment.servers.iter().filter(|s| !s.running());
        let crashed: Vec<String> = (clients.map(|(n, _)| n.clone()))
            .chain(servers.map(|s| s.name.clone()))
            .collect();
        for node in crashed {
            self.restart(&node);
        }
        // Every held fsync goes, as the simulator's disks heal.
        for (node, shim) in &mut self.shims {
            if let Err(e) = shim.hold_fsyncs(0) {
                self.recorder.record(
                    Event::nemesis(Op::Note)
                        .target(node)
                        .detail(format!("{node}'s shim file could not be written: {e}")),
                );
            }
        }
        // Every cut heals and every delay spike ends now; nothing else pending fires.
        for action in std::mem::take(&mut self.timers).into_values() {
            if matches!(action, Action::Heal { .. } | Action::Flush { .. }) {
                self.fire(action);
            }
        }
    }

    /// Kills every client and collects the lines they wrote before.
    fn stop_clients(&mut self, rx: &Receiver<(String, u32, ClientMsg)>) {
        for c in self.clients.values_mut() {
            if let Some(p) = c.proc.take() {
                p.kill();
            }
        }
        // The readers end at EOF, now that the writers are dead.
        let (tx, _) = channel();
        drop(std::mem::replace(&mut self.tx, tx));
        while let Ok((_, _, msg)) = rx.recv_timeout(Duration::from_millis(500)) {
            if let ClientMsg::Event(event) = msg {
                self.recorder.push_stamped(event);
            }
        }
    }
}
