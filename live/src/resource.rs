//! The fenced resource as a small TCP server of locksim's, answering by the model's own
//! rules (`locksim_protocols::resource::ResourceState`): a counter and the highest token
//! accepted; with fencing `on` a write below the highest token is rejected; with
//! `mode = "cas"` a write applies only if the counter still holds the value its writer read.
//! Its state is written and fsynced to a file before a write is acknowledged. It runs in the
//! parent process (it is never paused: the scenarios pause clients and lock servers) and
//! records its decisions in the history with the parent's stamps. Protocol: the model's
//! `ResourceReq` as one line of JSON, its `ResourceResp` as one line back.

use crate::history::Recorder;
use locksim_protocols::resource::{ResourceReq, ResourceResp, ResourceRules, ResourceState};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

struct Resource {
    rules: ResourceRules,
    state: Mutex<ResourceState>,
    file: PathBuf,
    recorder: Recorder,
}

impl Resource {
    /// The model's answer ([`ResourceState::answer`]); an accepted write is on disk first.
    fn answer(&self, req: ResourceReq) -> ResourceResp {
        // One request at a time, as the model's resource node serves them.
        let mut s = self.state.lock().unwrap();
        let (resp, event) = s.answer(self.rules, &[], req);
        if resp == ResourceResp::Accepted {
            let text = serde_json::to_string(&*s).expect("the state serialises");
            let mut f = std::fs::File::create(&self.file).expect("the run directory is writable");
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_data())
                .expect("the resource file syncs");
        }
        event.into_iter().for_each(|e| self.recorder.record(e));
        resp
    }

    fn serve(&self, stream: TcpStream) {
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            let answer = match serde_json::from_str::<ResourceReq>(&line) {
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
        state: Mutex::new(ResourceState::default()),
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
