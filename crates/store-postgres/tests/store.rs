//! The `Tx` vocabulary on a real PostgreSQL server (see `migrations.rs` for the server): round
//! trips, rollbacks, and two stores on one database writing at once, as two daemons would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_core::{NewEvent, Timestamp};
use conduit_store::testing::{self, event, work};
use conduit_store::{Store, StoreError};
use conduit_store_postgres::testing::TestDatabase;
use conduit_store_postgres::PostgresStore;

/// An event of the chain of `root`.
fn in_chain(id: &str, root: &str) -> NewEvent {
    let mut e = event(id);
    e.causation.root = root.into();
    e
}

fn open(db: &TestDatabase) -> Box<dyn Store> {
    Box::new(PostgresStore::open(&db.url()).unwrap())
}

/// The cases every adapter passes, each in a database of its own.
#[test]
fn the_shared_store_cases_hold() {
    for case in testing::CASES {
        let Some(db) = TestDatabase::create() else { return };
        case(&*open(&db));
    }
}

#[test]
fn a_failed_body_rolls_back_and_its_connection_serves_the_next() {
    let Some(db) = TestDatabase::create() else { return };
    let store = open(&db);
    // A statement the server refused aborts its transaction; the next one starts clean.
    let refused = store.write(|tx| {
        tx.insert_work(&work("w1", &[]))?;
        tx.insert_work(&work("w1", &[]))
    });
    assert!(matches!(refused, Err(StoreError::Backend(_))), "{refused:?}");
    assert!(store.read(|tx| tx.get_work("w1")).unwrap().is_none());
    store.write(|tx| tx.insert_work(&work("w1", &[]))).unwrap();
}

/// SQLite lets a body go on after a statement failed; PostgreSQL aborts the transaction and would
/// answer its COMMIT with a silent rollback. The store says so instead of reporting success.
#[test]
fn a_body_that_ignores_a_refused_statement_is_not_reported_committed() {
    let Some(db) = TestDatabase::create() else { return };
    let store = open(&db);
    store.write(|tx| tx.insert_work(&work("w1", &[]))).unwrap();
    let swallowed = store.write(|tx| {
        tx.insert_work(&work("w2", &[]))?;
        let _ignored = tx.insert_work(&work("w1", &[]));
        Ok::<_, StoreError>(())
    });
    assert!(matches!(swallowed, Err(StoreError::Backend(_))), "{swallowed:?}");
    assert!(store.read(|tx| tx.get_work("w2")).unwrap().is_none());
}

/// Two stores on one database, as two daemons: their writers take turns, so every event of one
/// chain gets the next place in it (its unique index would refuse two writers reading the same
/// newest place), and every write lands.
#[test]
fn two_stores_writing_one_chain_at_once_take_turns() {
    let Some(db) = TestDatabase::create() else { return };
    let stores = [open(&db), open(&db)];
    let (writers, each) = (8, 25);
    std::thread::scope(|s| {
        for w in 0..writers {
            let store = &stores[w % 2];
            s.spawn(move || {
                for n in 0..each {
                    store
                        .write(|tx| tx.insert_event(in_chain(&format!("e{w}-{n}"), "root")))
                        .unwrap();
                }
            });
        }
    });
    let events = stores[0].read(|tx| tx.list_events(None, 1000)).unwrap();
    assert_eq!(events.len(), writers * each);
    let back = stores[1]
        .read(|tx| tx.causal_event_time_back("root", (writers * each) as u32))
        .unwrap();
    assert_eq!(back, Some(Timestamp(5)), "the chain is numbered 1..=n without a gap");
}

/// The daemon's async tasks and its start-up reach the store from inside a tokio runtime, where
/// the `postgres` client alone would panic.
#[test]
fn the_store_answers_from_inside_an_async_runtime() {
    let Some(db) = TestDatabase::create() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let read = runtime.block_on(async {
        let store = open(&db);
        store.write(|tx| tx.insert_work(&work("w1", &[])))?;
        store.read(|tx| tx.get_work("w1"))
    });
    assert!(read.unwrap().is_some());
}

#[test]
fn over_tls_a_store_needs_its_password_and_a_certificate_its_authority_signed() {
    let Some(db) = TestDatabase::create() else { return };
    let (url, access) = db.over_tls();
    let store = PostgresStore::open_with(&url, &access).expect("TLS, the password and the authority");
    testing::a_shared_key_is_made_once(&store);
    let mut client = conduit_store_postgres::connect(&db.url()).unwrap();
    let encrypted: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE usename = 'oc_tls' AND ssl",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(encrypted > 0, "the store's connections are encrypted");
    let public_roots = conduit_store_postgres::Access {
        ca_pem: None,
        ..access.clone()
    };
    assert!(
        PostgresStore::open_with(&url, &public_roots).is_err(),
        "a certificate no trusted authority signed"
    );
    let wrong = conduit_store_postgres::Access {
        password: Some("not-the-password".into()),
        ..access.clone()
    };
    assert!(PostgresStore::open_with(&url, &wrong).is_err(), "a wrong password");
    let no_password = conduit_store_postgres::Access {
        password: None,
        ..access.clone()
    };
    assert!(PostgresStore::open_with(&url, &no_password).is_err(), "no password");
    // The server takes this role only over TLS: an authority given turns it on for loopback too.
    let loopback = url.replace("localhost", "127.0.0.1").replace("?sslmode=require", "");
    assert!(
        PostgresStore::open_with(&loopback, &access).is_ok(),
        "TLS to 127.0.0.1 with the authority"
    );
    assert!(
        PostgresStore::open_with(&loopback, &no_password).is_err(),
        "control: and the password still counts"
    );
}
