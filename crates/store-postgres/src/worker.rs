//! A connection's own thread. The `postgres` client drives its socket with a runtime of its own,
//! which cannot run on a thread that is already inside one: so each connection lives on a thread
//! of its own and the store's callers (async tasks among them) hand it work and wait for the
//! answer, as they wait for SQLite's file.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;

use postgres::{Client, Statement};

use crate::target::Target;
use crate::Result;
use conduit_store::StoreError;

/// A connection's prepared statements, by the shared statement's text.
#[derive(Default)]
pub struct Statements(pub HashMap<String, Statement>);

/// What a connection's thread holds: the client and the statements prepared on it.
pub struct Worker {
    pub client: Client,
    pub statements: Statements,
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// A handle on a connection's thread; the thread and its connection end when this is dropped.
pub struct Conn {
    jobs: mpsc::Sender<Job>,
    /// The connection failed or closed: not to be used again.
    pub broken: bool,
}

impl Conn {
    /// Dials `target` on a new thread.
    pub fn open(target: &Target) -> Result<Conn> {
        let target = target.clone();
        let (jobs, queue) = mpsc::channel::<Job>();
        let (dialled, dial_result) = mpsc::sync_channel(1);
        thread::Builder::new()
            .name("store-pg".into())
            .spawn(move || {
                let mut worker = match target.dial().and_then(limit_idle_transactions) {
                    Ok(client) => Worker {
                        client,
                        statements: Statements::default(),
                    },
                    Err(e) => return drop(dialled.send(Err(e))),
                };
                let _ = dialled.send(Ok(()));
                for job in queue {
                    job(&mut worker);
                }
            })
            .map_err(|_| StoreError::Backend("could not start a store connection's thread".into()))?;
        dial_result.recv().map_err(|_| gone())??;
        Ok(Conn { jobs, broken: false })
    }

    /// Runs `f` on the connection's thread and answers what it returned.
    pub fn on<T: Send + 'static>(&mut self, f: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static) -> Result<T> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |worker| {
            let result = f(worker);
            let _ = reply.send((result, worker.client.is_closed()));
        });
        let answered = self.jobs.send(job).ok().and_then(|()| answer.recv().ok());
        let Some((result, closed)) = answered else {
            self.broken = true;
            return Err(gone());
        };
        self.broken |= closed;
        result
    }
}

/// A daemon stopped inside a transaction (frozen, or its thread stuck) would hold the write lock
/// of every daemon on the store; the server ends such a session after five seconds instead (a
/// lease, at least 10s, outlasts that). No transaction of the daemon's waits that long between
/// two statements: its bodies do no I/O but the store's.
fn limit_idle_transactions(mut client: Client) -> Result<Client> {
    client
        .batch_execute("SET idle_in_transaction_session_timeout = '5s'")
        .map_err(crate::backend)?;
    Ok(client)
}

fn gone() -> StoreError {
    StoreError::Backend("a store connection's thread ended".into())
}
