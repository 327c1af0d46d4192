//! The real daemon: attempts are real shell processes that publish their endpoint and hold; calls
//! go over their toolbelt sockets; supersession is a SIGKILL and a restart.

use std::cell::RefCell;
use std::path::Path;

use conduit_store_postgres::testing::TestDatabase;
use serde_json::Value;

use super::{suite_config, Attempt, Target};
use crate::common::{http, read_token, store_files, wait_until, Daemon};

pub struct RealDaemon {
    daemon: RefCell<Daemon>,
    /// The PostgreSQL database it runs on, when not its embedded SQLite file.
    postgres: Option<TestDatabase>,
}

/// Publishes the attempt's execution id, endpoint and token file into `<scratch>/run.*`, then holds
/// until `<scratch>/release` exists.
fn hold_command(scratch: &Path) -> Vec<String> {
    let d = scratch.display();
    let script = format!(
        "r=$(mktemp -d {d}/run.XXXXXX) && cp \"$(dirname \"$(dirname \"$OS_TOKEN_FILE\")\")/execution\" \"$r/execution\" \
         && echo \"$OS_ENDPOINT\" > \"$r/endpoint\" && echo \"$OS_TOKEN_FILE\" > \"$r/token_file\" && touch \"$r/ready\"; \
         while [ -d {d} ] && [ ! -f {d}/release ]; do sleep 0.05; done"
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

impl RealDaemon {
    pub fn new() -> RealDaemon {
        let daemon = Daemon::start_with(|scratch| suite_config(&hold_command(scratch)));
        RealDaemon {
            daemon: RefCell::new(daemon),
            postgres: None,
        }
    }

    /// A daemon on a PostgreSQL database of its own (`--store`).
    pub fn on_postgres(db: TestDatabase) -> RealDaemon {
        let daemon = Daemon::start_on_store(&db.url(), &[], |scratch| suite_config(&hold_command(scratch)));
        RealDaemon {
            daemon: RefCell::new(daemon),
            postgres: Some(db),
        }
    }

    /// The published run of `execution`: its endpoint and token file.
    fn published(&self, execution: &str) -> Option<(String, String)> {
        let daemon = self.daemon.borrow();
        let entries = std::fs::read_dir(daemon.scratch()).ok()?;
        entries.flatten().map(|e| e.path()).find_map(|run| {
            let read = |f: &str| std::fs::read_to_string(run.join(f)).ok().map(|s| s.trim().to_owned());
            (run.join("ready").exists() && read("execution")? == execution)
                .then(|| Some((read("endpoint")?, read("token_file")?)))
                .flatten()
        })
    }
}

impl Target for RealDaemon {
    fn attempt(&self, binding: &str) -> Attempt {
        let work = self.daemon.borrow().create_work("suite", binding);
        let mut execution = String::new();
        wait_until("the attempt to start", || {
            let items = self.daemon.borrow().json(&["executions", "list", "--work", &work])["items"].clone();
            execution = items[0]["id"].as_str().unwrap_or_default().to_owned();
            !execution.is_empty()
        });
        let mut published = None;
        wait_until("the attempt to publish its endpoint", || {
            published = self.published(&execution);
            published.is_some()
        });
        let (endpoint, token_file) = published.unwrap();
        Attempt {
            execution_id: execution,
            work_id: work,
            token: read_token(Path::new(&token_file)),
            endpoint,
        }
    }

    fn call(&self, on: &Attempt, token: &str, body: Value) -> (u16, Value) {
        http(
            Path::new(&on.endpoint),
            "POST",
            "/v1/toolbelt/call",
            Some(token),
            Some(&body),
        )
    }

    fn guidance(&self, on: &Attempt, token: &str) -> (u16, Value) {
        http(
            Path::new(&on.endpoint),
            "GET",
            "/v1/toolbelt/guidance",
            Some(token),
            None,
        )
    }

    fn operator_token(&self) -> String {
        self.daemon.borrow().operator_token()
    }

    fn events(&self, work: &str) -> Vec<Value> {
        self.daemon.borrow().events(work)
    }

    fn supersede(&self, attempt: &Attempt) -> String {
        let token_file = self.published(&attempt.execution_id).expect("published").1;
        let mut daemon = self.daemon.borrow_mut();
        daemon.kill();
        daemon.launch();
        wait_until("the token to rotate", || {
            read_token(Path::new(&token_file)) != attempt.token
        });
        let rotated = read_token(Path::new(&token_file));
        let socket = Path::new(&attempt.endpoint);
        wait_until("the socket to be served again", || {
            http(socket, "GET", "/v1/toolbelt/guidance", Some(&rotated), None).0 == 200
        });
        rotated
    }

    fn store_bytes(&self) -> Vec<u8> {
        match &self.postgres {
            Some(db) => db.dump(),
            None => store_files(&self.daemon.borrow().state),
        }
    }
}
