//! The fenced resource as a small TCP server of locksim's, with the model's semantics
//! (`locksim_protocols::resource`): a counter and the highest token accepted; with fencing
//! `on` a write below the highest token is rejected; with `mode = "cas"` a write applies
//! only if the counter still holds the value its writer read. Its state is written and
//! fsynced to a file before a write is acknowledged. It runs in the parent process (it is
//! never paused: the scenarios pause clients and lock servers) and records its decisions
//! in the history with the parent's stamps. Protocol: one JSON request per line, one JSON
//! answer per line.

use crate::history::Recorder;
use locksim_check::{Event, Kind, Op};
use locksim_protocols::resource::{Fencing, ResourceRules, WriteMode, RESOURCE};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A request.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Read the counter.
    Read,
    /// Write the counter.
    Write {
        /// The new value.
        value: i64,
        /// The writer's token.
        token: Option<u64>,
        /// The writer's grant.
        grant: String,
        /// The value the writer read.
        expected: Option<i64>,
    },
}

/// An answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The counter.
    Value(i64),
    /// Applied (and on disk).
    Accepted,
    /// Refused; the highest token accepted so far (0 if none), as the model answers.
    Rejected {
        /// The highest token accepted so far.
        highest: u64,
    },
}

#[derive(Default, Serialize)]
struct State {
    value: i64,
    highest_token: Option<u64>,
}

/// Why a write is refused: the same rules as the model's resource (`refusal` in
/// `locksim_protocols::resource`).
fn refusal(
    rules: ResourceRules,
    s: &State,
    token: Option<u64>,
    expected: Option<i64>,
) -> Option<String> {
    if let (Fencing::On, Some(t), Some(h)) = (rules.fencing, token, s.highest_token) {
        if t < h {
            return Some(format!("token below highest seen ({h})"));
        }
    }
    match (rules.mode, expected) {
        (WriteMode::Cas, Some(e)) if e != s.value => Some(format!(
            "compare-and-set failed: the value is {}, not the {e} read",
            s.value
        )),
        _ => None,
    }
}

struct Resource {
    rules: ResourceRules,
    state: Mutex<State>,
    file: PathBuf,
    recorder: Recorder,
}

impl Resource {
    fn answer(&self, req: Request) -> Answer {
        // One request at a time, as the model's resource node serves them.
        let mut s = self.state.lock().unwrap();
        let (value, token, grant, expected) = match req {
            Request::Read => return Answer::Value(s.value),
            Request::Write {
                value,
                token,
                grant,
                expected,
            } => (value, token, grant, expected),
        };
        let event = Event::new(RESOURCE, Kind::Info, Op::ResourceAccept)
            .grant(grant)
            .token(token)
            .value(value);
        if let Some(why) = refusal(self.rules, &s, token, expected) {
            self.recorder.record(Event {
                op: Op::ResourceReject,
                detail: Some(why),
                ..event
            });
            let highest = s.highest_token.unwrap_or(0);
            return Answer::Rejected { highest };
        }
        s.value = value;
        if let Some(t) = token {
            s.highest_token = Some(s.highest_token.map_or(t, |h| h.max(t)));
        }
        // Committed before it is acknowledged.
        let text = serde_json::to_string(&*s).expect("the state serialises");
        let mut f = std::fs::File::create(&self.file).expect("the run directory is writable");
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_data())
            .expect("the resource file syncs");
        self.recorder.record(event);
        Answer::Accepted
    }

    fn serve(&self, stream: TcpStream) {
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            let answer = match serde_json::from_str::<Request>(&line) {
                Ok(req) => self.answer(req),
                Err(_) => return,
            };
            let mut text = serde_json::to_string(&answer).expect("answers serialise");
            text.push('\n');
            if out.write_all(text.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// Starts the resource on a free loopback port (a thread per connection); returns its
/// address. Its threads end with the process.
pub fn start(
    rules: ResourceRules,
    dir: &std::path::Path,
    recorder: Recorder,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let resource = Arc::new(Resource {
        rules,
        state: Mutex::new(State::default()),
        file: dir.join("resource.json"),
        recorder,
    });
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let resource = resource.clone();
            std::thread::spawn(move || resource.serve(stream));
        }
    });
    Ok(addr)
}
