//! For tests: a database of its own on the test server `OPEN_CONDUIT_TEST_POSTGRES` names
//! (`.ci/postgres start DIR` prints such a URL), dropped with its connections at the test's end.
//! Without the variable a test says it skipped, unless `OPEN_CONDUIT_REQUIRE_POSTGRES=1` (CI) makes
//! that a failure.

use crate::Result;

/// A client for `url`, used on a thread of its own: a test may be inside a tokio runtime, where the
/// `postgres` client cannot run.
fn with_client<T: Send>(url: &str, f: impl FnOnce(&mut postgres::Client) -> T + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| crate::connect(url).map(|mut client| f(&mut client)))
            .join()
            .unwrap_or_else(|_| Err(conduit_store::StoreError::Backend("a test's client panicked".into())))
    })
}

/// A database made for one test, dropped when this is dropped.
pub struct TestDatabase {
    pub admin: String,
    pub name: String,
}

impl TestDatabase {
    /// A new empty database, or `None` (having said so) when no test server is configured.
    ///
    /// # Panics
    /// When the server refuses, or when CI requires a server and none is configured.
    #[allow(clippy::expect_used)]
    pub fn create() -> Option<TestDatabase> {
        let Ok(admin) = std::env::var("OPEN_CONDUIT_TEST_POSTGRES") else {
            assert!(
                std::env::var("OPEN_CONDUIT_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "OPEN_CONDUIT_TEST_POSTGRES is not set: start a server with `.ci/postgres start DIR`"
            );
            eprintln!("skipped: OPEN_CONDUIT_TEST_POSTGRES is not set (see .ci/postgres)");
            return None;
        };
        let name = format!("oc_test_{}", conduit_store::new_id().replace('-', ""));
        with_client(&admin, |client| {
            client.batch_execute(&format!("CREATE DATABASE \"{name}\""))
        })
        .expect("the test server answers")
        .expect("the test server makes a database");
        Some(TestDatabase { admin, name })
    }

    /// The URL of this database: the server's, naming it (a later `dbname` wins in both forms).
    pub fn url(&self) -> String {
        let joiner = match (self.admin.contains("://"), self.admin.contains('?')) {
            (false, _) => " ",
            (true, true) => "&",
            (true, false) => "?",
        };
        format!("{}{joiner}dbname={}", self.admin, self.name)
    }

    /// This database over TLS on the test server's loopback port, as the role `oc_tls` (made its
    /// owner): the URL (naming `localhost`, which the certificate names) and the password and
    /// certificate authority `.ci/postgres` left in its `tls` directory.
    ///
    /// # Panics
    /// When the server was not started by `.ci/postgres`, or refuses.
    #[allow(clippy::expect_used)]
    pub fn over_tls(&self) -> (String, crate::Access) {
        let dir = self
            .admin
            .split(['?', '&'])
            .find_map(|part| part.strip_prefix("host="))
            .expect("the test server's URL names its socket directory");
        let tls = std::path::Path::new(dir).join("tls");
        let read = |name: &str| std::fs::read(tls.join(name)).expect("a file .ci/postgres wrote");
        let text = |name: &str| String::from_utf8(read(name)).expect("text").trim().to_owned();
        let (name, owner) = (&self.name, "oc_tls");
        with_client(&self.admin, |client| {
            client.batch_execute(&format!("ALTER DATABASE \"{name}\" OWNER TO {owner}"))
        })
        .expect("the test server answers")
        .expect("the test database changes owner");
        with_client(&self.url(), |client| {
            client.batch_execute(&format!("ALTER SCHEMA public OWNER TO {owner}"))
        })
        .expect("the test database answers")
        .expect("its schema changes owner");
        let url = format!("postgresql://{owner}@localhost:{}/{name}?sslmode=require", text("port"));
        let access = crate::Access {
            password: Some(text("password")),
            ca_pem: Some(read("ca.pem")),
        };
        (url, access)
    }

    /// Every row of every table, as text: what a test searches for a plaintext it must not find.
    #[allow(clippy::expect_used)]
    pub fn dump(&self) -> Vec<u8> {
        with_client(&self.url(), dump_tables).expect("the test database answers")
    }
}

#[allow(clippy::expect_used)]
fn dump_tables(client: &mut postgres::Client) -> Vec<u8> {
    let tables = client
        .query(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
            &[],
        )
        .expect("the tables are listed");
    let mut bytes = Vec::new();
    for table in tables {
        let table: String = table.get(0);
        let rows = client
            .query(&format!("SELECT * FROM {table}"), &[])
            .expect("a table is read");
        rows.iter().for_each(|row| dump_row(row, &mut bytes));
    }
    bytes
}

/// A row's text and bytes columns as they are stored (a digest as its 32 bytes, not as hex).
fn dump_row(row: &postgres::Row, into: &mut Vec<u8>) {
    for (index, column) in row.columns().iter().enumerate() {
        let value = match *column.type_() {
            postgres::types::Type::BYTEA => row.get::<_, Option<&[u8]>>(index),
            postgres::types::Type::TEXT => row.get::<_, Option<&str>>(index).map(str::as_bytes),
            _ => None,
        };
        into.extend_from_slice(value.unwrap_or_default());
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let drop_it = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let _ = with_client(&self.admin, |client| client.batch_execute(&drop_it));
    }
}
