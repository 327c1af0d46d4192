//! Migrations against a real PostgreSQL server: the one `OPEN_CONDUIT_TEST_POSTGRES` names (`.ci/postgres
//! start DIR` prints such a URL). Each test works in a database of its own, dropped at its end.
//! Without the variable the tests say skipped, unless `OPEN_CONDUIT_REQUIRE_POSTGRES=1` (CI) makes
//! that a failure.

// A test stops loudly on what it did not expect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_store::{Store, StoreError};
use conduit_store_postgres::testing::TestDatabase as Database;
use conduit_store_postgres::{connect, migrations, PostgresStore};

fn applied(url: &str) -> i64 {
    let mut client = connect(url).unwrap();
    client
        .query_one("SELECT COUNT(*) FROM schema_migrations", &[])
        .unwrap()
        .get(0)
}

#[test]
fn an_empty_database_is_migrated_to_this_releases_schema_once() {
    let Some(db) = Database::create() else { return };
    assert_eq!(migrations::version(&mut connect(&db.url()).unwrap()).unwrap(), 0);
    let store = PostgresStore::open(&db.url()).unwrap();
    assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED);
    let mut client = connect(&db.url()).unwrap();
    let current: String = client.query_one("SELECT current_database()", &[]).unwrap().get(0);
    assert_eq!(current, db.name, "the URL names the test's own database");
    let events: Option<String> = client
        .query_one("SELECT to_regclass('events')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(events.as_deref(), Some("events"));
    drop(PostgresStore::open(&db.url()).unwrap());
    assert_eq!(
        applied(&db.url()),
        migrations::SUPPORTED,
        "reopening applies nothing again"
    );
}

#[test]
fn daemons_starting_at_once_migrate_once() {
    let Some(db) = Database::create() else { return };
    let url = db.url();
    let opened: Vec<_> = std::thread::scope(|s| {
        let starts: Vec<_> = (0..4)
            .map(|_| s.spawn(|| PostgresStore::open(&url).map(drop)))
            .collect();
        starts.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(opened.iter().all(Result::is_ok), "{opened:?}");
    assert_eq!(applied(&url), migrations::SUPPORTED);
}

#[test]
fn a_store_migrated_by_a_newer_release_is_refused_and_left_alone() {
    let Some(db) = Database::create() else { return };
    drop(PostgresStore::open(&db.url()).unwrap());
    let newer = migrations::SUPPORTED + 1;
    let mut client = connect(&db.url()).unwrap();
    client
        .execute("INSERT INTO schema_migrations (version) VALUES ($1)", &[&newer])
        .unwrap();
    match PostgresStore::open(&db.url()) {
        Err(StoreError::NewerSchema { found, supported }) => {
            assert_eq!((found, supported), (newer, migrations::SUPPORTED));
        }
        other => panic!("expected NewerSchema, got {:?}", other.map(drop)),
    }
    assert_eq!(applied(&db.url()), migrations::SUPPORTED + 1);
}

#[test]
fn a_migrations_table_another_role_made_first_is_refused() {
    let Some(db) = Database::create() else { return };
    let role = format!("{}_other", db.name);
    let mut client = connect(&db.url()).unwrap();
    client
        .batch_execute(&format!(
            "CREATE ROLE {role};
             CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
             INSERT INTO schema_migrations (version) VALUES (1);
             ALTER TABLE schema_migrations OWNER TO {role};"
        ))
        .unwrap();
    let opened = PostgresStore::open(&db.url()).map(drop);
    assert!(matches!(opened, Err(StoreError::Backend(_))), "{opened:?}");
    let admin = db.admin.clone();
    drop((client, db));
    connect(&admin)
        .unwrap()
        .batch_execute(&format!("DROP ROLE {role}"))
        .unwrap();
}

#[test]
fn a_store_at_the_previous_schema_version_is_upgraded_in_place() {
    let Some(db) = Database::create() else { return };
    let previous = migrations::SUPPORTED as usize - 1;
    migrations::migrate_to(&mut connect(&db.url()).unwrap(), previous).unwrap();
    let mut client = connect(&db.url()).unwrap();
    client
        .execute(
            "INSERT INTO config_generations (generation, hash, config, created_at) VALUES (1, 'h', '{}', 0)",
            &[],
        )
        .unwrap();
    let store = PostgresStore::open(&db.url()).unwrap();
    assert_eq!(store.schema_version().unwrap(), migrations::SUPPORTED);
    let kept = (&store as &dyn Store).read(|tx| tx.generation(1)).unwrap();
    assert_eq!(kept, Some(("h".to_owned(), "{}".to_owned())), "the rows stay");
    conduit_store::testing::a_shared_key_is_made_once(&store);
}
