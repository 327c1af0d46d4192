//! The toolbelt in process: a real store (a SQLite file, or a PostgreSQL database), the same rules the
//! daemon runs, no sockets.

use std::sync::Arc;

use conduit_config::{parse, CurrentConfig};
use conduit_core::{Clock, OperatorRecord, Role, Timestamp};
use conduit_scheduler::{adopt, claim_next, create_work, Lessee, NewWork};
use conduit_server::SystemClock;
use conduit_store::{new_id, Store};
use conduit_store_postgres::testing::TestDatabase;
use conduit_store_postgres::PostgresStore;
use conduit_store_sqlite::SqliteStore;
use conduit_toolbelt::token::{digest, generate, issue};
use conduit_toolbelt::{Begun, CallRequest, Presented, Toolbelt};
use serde_json::{json, Value};

use super::{suite_config, Attempt, Target};
use crate::common::store_files;

pub struct InProcess {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    config: CurrentConfig,
    toolbelt: Toolbelt,
    operator: String,
    /// The PostgreSQL database the store is in, when it is not the SQLite file in `dir`.
    postgres: Option<TestDatabase>,
}

impl InProcess {
    /// On a SQLite file.
    pub fn new() -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
        InProcess::on(dir, store, None)
    }

    /// On a SQLite file that every transaction opens afresh: nothing a case relies on may live
    /// only in an open store (the seed's "reopened SQLite").
    pub fn reopened() -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        drop(SqliteStore::open(&path).unwrap());
        InProcess::on(dir, Arc::new(Reopened(path)), None)
    }

    /// On a PostgreSQL database of its own.
    pub fn on_postgres(db: TestDatabase) -> InProcess {
        let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&db.url()).unwrap());
        InProcess::on(tempfile::tempdir().unwrap(), store, Some(db))
    }

    fn on(dir: tempfile::TempDir, store: Arc<dyn Store>, postgres: Option<TestDatabase>) -> InProcess {
        let text = suite_config(&["true".to_owned()]);
        let config = CurrentConfig::new(parse(text.as_bytes()).unwrap().at_generation(1));
        let toolbelt = Toolbelt::new(store.clone(), config.clone(), Arc::new(SystemClock), Arc::default());
        let operator = generate();
        let record = OperatorRecord {
            id: new_id(),
            name: "local".into(),
            role: Role::Admin,
            digest: digest(&operator),
            created_at: now(),
            revoked_at: None,
            revoked_by: None,
        };
        store.write(|tx| tx.insert_operator(&record)).unwrap();
        InProcess {
            dir,
            store,
            config,
            toolbelt,
            operator,
            postgres,
        }
    }
}

/// A SQLite store opened from its file for each transaction, and closed after it.
struct Reopened(std::path::PathBuf);

impl Store for Reopened {
    fn transact(
        &self,
        mode: conduit_store::Mode,
        body: &mut dyn FnMut(&mut dyn conduit_store::Tx) -> Result<(), conduit_store::StoreError>,
    ) -> Result<(), conduit_store::StoreError> {
        SqliteStore::open(&self.0)?.transact(mode, body)
    }
}

fn now() -> Timestamp {
    SystemClock.now()
}

fn answer(result: Result<Value, conduit_core::Refusal>) -> (u16, Value) {
    match result {
        Ok(value) => (200, value),
        Err(refusal) => (refusal.code.http_status(), serde_json::to_value(&refusal).unwrap()),
    }
}

impl Target for InProcess {
    fn attempt(&self, binding: &str) -> Attempt {
        let config = self.config.get();
        let (claim, token) = self
            .store
            .write(|tx| {
                let new = NewWork::manual("suite", binding, json!({}), None);
                create_work(tx, &config, new, None, now())?;
                let claim = claim_next(tx, &config, &Lessee::new("in-process"), now())?.unwrap();
                let ops = config.granted_operations("suite", binding);
                let token = issue(tx, &claim.execution, &claim.work, ops, None, now())?;
                Ok::<_, conduit_scheduler::HostError>((claim, token))
            })
            .unwrap();
        Attempt {
            endpoint: claim.execution.id.clone(),
            execution_id: claim.execution.id,
            work_id: claim.work.id,
            token,
        }
    }

    fn call(&self, on: &Attempt, token: &str, body: Value) -> (u16, Value) {
        let request: CallRequest = serde_json::from_value(body).unwrap();
        // As the daemon's servers do: the store's work off the runtime, only the handler on it.
        let answered = request
            .checked()
            .and_then(|call| self.toolbelt.begin(&on.endpoint, &Presented::new(token), &call))
            .and_then(|begun| match begun {
                Begun::Answered(answer) => Ok(answer.into_value().unwrap()),
                Begun::Extension(pending) => {
                    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                    let ran = runtime.block_on(pending.ran());
                    self.toolbelt.finish(*pending, ran)
                }
            });
        answer(answered)
    }

    fn guidance(&self, on: &Attempt, token: &str) -> (u16, Value) {
        answer(self.toolbelt.guidance(&on.endpoint, token))
    }

    fn operator_token(&self) -> String {
        self.operator.clone()
    }

    fn events(&self, work: &str) -> Vec<Value> {
        let events = self.store.read(|tx| tx.list_events(Some(work), 1000)).unwrap();
        events.iter().map(|e| serde_json::to_value(e).unwrap()).collect()
    }

    fn supersede(&self, attempt: &Attempt) -> String {
        let config = self.config.get();
        self.store
            .write(|tx| {
                let claim = adopt(tx, &attempt.execution_id, &Lessee::new("in-process-2"), now())?.unwrap();
                let ops = config.granted_operations("suite", &claim.work.binding);
                Ok::<_, conduit_scheduler::HostError>(issue(tx, &claim.execution, &claim.work, ops, None, now())?)
            })
            .unwrap()
    }

    fn store_bytes(&self) -> Vec<u8> {
        match &self.postgres {
            Some(db) => db.dump(),
            None => store_files(self.dir.path()),
        }
    }
}
