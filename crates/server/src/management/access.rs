//! How a management handler reaches the store: the operator's credential and role, a read in one
//! transaction (with an ETag for single records), and an admitted mutation run once per key.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::Uri;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::{post, MethodRouter};
use conduit_config::Snapshot;
use conduit_core::canonical::sha256_hex;
use conduit_core::{ErrorCode, OperatorRecord, Refusal, Role};
use conduit_scheduler::Operator;
use conduit_store::{Store, StoreError, Tx};
use conduit_toolbelt::token::digest;
use futures_util::FutureExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::panic::{resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use super::state::Management;
use crate::envelope::{bearer, blocking, check_mutation, ok, parse_body, read_body, Answer, Failure};
use crate::idempotency::{once, once_outside, Keyed};

tokio::task_local! {
    /// The credential the request this task serves presented.
    static CALLER: Arc<Caller>;
}

/// The path of the capability document, the one route that needs no credential.
pub(super) const DISCOVERY: &str = "/.well-known/openwop";

/// When a listener checks a read's credential.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Checking {
    /// Every request before its handler runs: on a listener anyone on the machine can reach (loopback
    /// TCP), where an unknown caller must cost no more than the check.
    BeforeHandler,
    /// A read (a safe method, which changes nothing) inside its own read transaction, one crossing
    /// to the store instead of two ([`viewed`]): on the owner-only socket, whose every caller can
    /// read the operator's token anyway.
    InReads,
}

impl Checking {
    /// Whether a request made with `method` is checked before its handler runs: every request that
    /// may change something (an unsafe method), and every request where reads are not left to
    /// check themselves.
    fn before_handler(self, method: &Method) -> bool {
        self == Checking::BeforeHandler || !method.is_safe()
    }
}

/// Authenticates every request before it answers, so neither a path (served or not) nor a query
/// string decides an answer first: an execution token is `403 wrong_credential_class` on every
/// path, and anything else unknown or revoked is `401 unauthenticated`. A request that may change
/// something is checked before its handler runs, and so is every request where `checking` says so.
/// A read left to check itself and that did not (a route that reads nothing, a refused query, a
/// panic) is checked here before its answer leaves, and a failed check replaces the answer.
/// Handlers then ask [`operator`] for the role they need.
pub(super) async fn authenticated(
    State((store, checking)): State<(Arc<dyn Store>, Checking)>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == DISCOVERY {
        return next.run(request).await;
    }
    let caller = match bearer(request.headers()) {
        Ok(token) => Arc::new(Caller::presenting(&token, store)),
        Err(refused) => return refused.into_response(),
    };
    if checking.before_handler(request.method()) {
        if let Err(refused) = caller.check().await {
            return refused.into_response();
        }
    }
    let handled = AssertUnwindSafe(CALLER.scope(caller.clone(), next.run(request)))
        .catch_unwind()
        .await;
    match (caller.check().await, handled) {
        (Err(refused), _) => refused.into_response(),
        (Ok(_), Ok(response)) => response,
        (Ok(_), Err(panic)) => resume_unwind(panic),
    }
}

/// The authenticated operator, if its role allows `required` (checked before the body is read);
/// a lower role is `forbidden_role`. Unless the credential was checked already, this crosses to the
/// store to check it: a handler that reads the store anyway checks it in its read ([`viewed`]).
pub(crate) async fn operator(required: Role) -> Result<OperatorRecord, Failure> {
    allowed(caller()?.check().await?, required)
}

fn caller() -> Result<Arc<Caller>, Failure> {
    CALLER.try_with(Arc::clone).map_err(|_| Failure(Refusal::internal()))
}

fn allowed(op: OperatorRecord, required: Role) -> Result<OperatorRecord, Failure> {
    if !op.role.allows(required) {
        return Err(Failure(
            Refusal::new(
                ErrorCode::ForbiddenRole,
                format!("this needs the {} role", required.as_str()),
            )
            .with_remedy("ask an admin for a credential with that role"),
        ));
    }
    Ok(op)
}

/// A request's credential: the digest of the token it presented, and who that is once checked.
/// The check is made once per request; a transaction that failed before it leaves it unmade.
struct Caller {
    presented: [u8; 32],
    store: Arc<dyn Store>,
    checked: OnceLock<Result<OperatorRecord, Refusal>>,
}

impl Caller {
    fn presenting(token: &str, store: Arc<dyn Store>) -> Caller {
        Caller {
            presented: digest(token),
            store,
            checked: OnceLock::new(),
        }
    }

    /// Who the credential is, checked in a read of state of its own unless already checked.
    async fn check(self: &Arc<Self>) -> Result<OperatorRecord, Failure> {
        if let Some(checked) = self.checked.get() {
            return checked.clone().map_err(Failure);
        }
        let caller = self.clone();
        // A read of state: it sees every acknowledged revocation, and commits nothing held.
        blocking(move || caller.store.read_state(|tx| caller.check_in(tx))).await
    }

    /// Who the credential is, checked in `tx` unless already checked. Any transaction sees every
    /// acknowledged revocation.
    fn check_in(&self, tx: &mut dyn Tx) -> Result<OperatorRecord, Failure> {
        if let Some(checked) = self.checked.get() {
            return checked.clone().map_err(Failure);
        }
        // A store that failed is kept as the refusal it answers, so it is not asked again.
        let found = identify(tx, &self.presented).unwrap_or_else(|failed| Err(Failure::from(failed).0));
        self.checked.get_or_init(|| found).clone().map_err(Failure)
    }
}

/// The live operator credential whose token has the digest `presented`, or why there is none.
fn identify(tx: &mut dyn Tx, presented: &[u8; 32]) -> Result<Result<OperatorRecord, Refusal>, StoreError> {
    if let Some(op) = tx.operator_by_digest(presented)?.filter(|o| o.revoked_at.is_none()) {
        return Ok(Ok(op));
    }
    if tx.token_by_digest(presented)?.is_some() {
        return Ok(Err(Refusal::wrong_credential_class()));
    }
    Ok(Err(Refusal::new(
        ErrorCode::Unauthenticated,
        "the operator credential is unknown or revoked",
    )
    .with_remedy("use the token in <state>/private/operator.token")))
}

/// A mutation's request, admitted: its operator, its body parsed strictly and checked, and its
/// Idempotency-Key.
pub(super) struct Admitted<B> {
    op: OperatorRecord,
    keyed: Keyed,
    request: B,
}

/// Admits a mutation: the operator holds `role`, the request is a mutation, the body parses strictly
/// and passes `check`, and it carries an Idempotency-Key, in that order. Nothing is written yet.
pub(super) async fn admit<B: DeserializeOwned>(
    headers: &HeaderMap,
    uri: &Uri,
    body: Body,
    role: Role,
    check: impl FnOnce(&B) -> Result<(), Refusal>,
) -> Result<Admitted<B>, Failure> {
    let op = operator(role).await?;
    check_mutation(headers, uri)?;
    let body = read_body(body).await?;
    let request: B = parse_body(&body)?;
    check(&request)?;
    let keyed = Keyed::new(&op, headers, "POST", uri.path(), &body)?;
    Ok(Admitted { op, keyed, request })
}

/// What a mutation does in its transaction, given the operator as the actor of what it records.
pub(super) type Mutation<B> =
    dyn FnOnce(&mut dyn Tx, &Snapshot, &Operator<'_>, B) -> Result<(StatusCode, Value), Failure> + Send;

impl<B: Send + 'static> Admitted<B> {
    /// The operator whose request it is.
    pub(super) fn operator(&self) -> &OperatorRecord {
        &self.op
    }

    /// Runs the mutation once per key, in one transaction, then wakes the scheduler.
    pub(super) async fn once(self, s: &Management, run: Box<Mutation<B>>) -> Answer {
        let Admitted { op, keyed, request } = self;
        let config = s.config.get();
        let answer = once(s.store.clone(), keyed, move |tx, seed| {
            let by = Operator {
                actor: &op.principal(),
                seed,
            };
            run(tx, &config, &by, request)
        })
        .await?;
        s.kick.notify_one();
        Ok(answer)
    }

    /// Runs the mutation once per key outside any transaction: a daemon service does the work and
    /// only the answer is recorded under the key.
    pub(super) async fn once_outside(
        self,
        s: &Management,
        run: impl FnOnce(B) -> Result<(StatusCode, Value), Failure> + Send + 'static,
    ) -> Answer {
        let request = self.request;
        once_outside(s.store.clone(), self.keyed, move || run(request)).await
    }
}

/// A control's effect on the resource `id` names, with the operator as its actor.
pub(super) type Control<B> = fn(&mut dyn Tx, &Snapshot, &str, &Operator<'_>, B) -> Reply;

/// What a control answers: its JSON, or the refusal.
pub(super) type Reply = Result<Value, Failure>;

/// An operator control on the resource `{id}` names: the `operate` role, a strict body, an
/// Idempotency-Key, one transaction, and `200` with what `run` answers.
pub(super) fn control<B: DeserializeOwned + Send + 'static>(run: Control<B>) -> MethodRouter<Management> {
    post(
        move |State(s): State<Management>, headers: HeaderMap, uri: Uri, Path(id): Path<String>, body: Body| async move {
            let admitted = admit(&headers, &uri, body, Role::Operate, |_: &B| Ok(())).await?;
            let run = move |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, request: B| {
                Ok((StatusCode::OK, run(tx, config, &id, by, request)?))
            };
            admitted.once(&s, Box::new(run)).await
        },
    )
}

/// The body of a control that takes none: `{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoBody {}

/// For a `view` operator, answers `200` with what `f` reads in one read transaction.
pub(crate) async fn read<T: Serialize + Send + 'static>(
    s: &Management,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    ok(StatusCode::OK, &viewed(s, f).await?)
}

/// What `f` reads in one read transaction, for an operator with the `view` role, checked first in
/// the same transaction: one crossing to the store.
pub(super) async fn viewed<T: Send + 'static>(
    s: &Management,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    let caller = caller()?;
    let store = s.store.clone();
    blocking(move || {
        store.read(|tx| {
            allowed(caller.check_in(tx)?, Role::View)?;
            f(tx)
        })
    })
    .await
}

/// A single read: `200` with a revision ETag, or `304` when the request's `If-None-Match` already
/// names it.
pub(super) async fn read_one<T: Serialize + Send + 'static>(
    s: &Management,
    headers: &HeaderMap,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, Failure> + Send + 'static,
) -> Answer {
    let body = serde_json::to_string(&viewed(s, f).await?).unwrap_or_default();
    Ok(revision(headers, body))
}

/// A single resource's JSON with its revision ETag (a digest of the bytes answered), or `304` with
/// no body when the request's `If-None-Match` already names that revision.
pub(super) fn revision(headers: &HeaderMap, body: String) -> Response {
    let etag = format!("\"{}\"", &sha256_hex(body.as_bytes())[..32]);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    let mut response = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    if let Ok(value) = header::HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

pub(super) fn found<T>(record: Option<T>, what: &str) -> Result<T, Failure> {
    record.ok_or_else(|| Failure(Refusal::not_found(what)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::to_bytes;
    use axum::routing::get;
    use axum::Router;
    use conduit_store::new_id;
    use conduit_store_sqlite::SqliteStore;
    use conduit_toolbelt::token;
    use tower::ServiceExt;

    use super::*;

    /// A store holding one `view` operator, and that operator's token.
    fn store_with_an_operator(dir: &std::path::Path) -> (Arc<dyn Store>, String) {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("store.db")).unwrap());
        let token = token::generate();
        let op = OperatorRecord {
            id: new_id(),
            name: "viewer".into(),
            role: Role::View,
            digest: token::digest(&token),
            created_at: crate::clock::now(),
            revoked_at: None,
            revoked_by: None,
        };
        store.write(|tx| tx.insert_operator(&op)).unwrap();
        (store, token)
    }

    /// Routes that never check their caller: one answers a secret, one panics. `ran` counts the
    /// handlers that ran.
    fn unchecked_routes(store: Arc<dyn Store>, checking: Checking, ran: Arc<AtomicUsize>) -> Router {
        let counted = ran.clone();
        Router::new()
            .route(
                "/secret",
                get(move || async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    "secret"
                }),
            )
            .route(
                "/panics",
                get(move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                    panics()
                }),
            )
            .layer(axum::middleware::from_fn_with_state((store, checking), authenticated))
    }

    async fn panics() -> &'static str {
        panic!("a bug before the check")
    }

    /// The unchecked routes behind a listener that checks as `checking`, over a store of their own
    /// (kept alive by the returned dir), with its operator's token and the count of handlers run.
    fn listener(checking: Checking) -> (tempfile::TempDir, Router, String, Arc<AtomicUsize>) {
        let dir = tempfile::tempdir().unwrap();
        let (store, token) = store_with_an_operator(dir.path());
        let ran = Arc::new(AtomicUsize::new(0));
        let router = unchecked_routes(store, checking, ran.clone());
        (dir, router, token, ran)
    }

    async fn get_as(router: Router, path: &str, token: &str) -> (StatusCode, String) {
        let request = Request::get(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_read_that_never_checked_answers_only_once_its_credential_is_checked() {
        let (_dir, router, token, ran) = listener(Checking::InReads);
        let (status, body) = get_as(router.clone(), "/secret", "not-a-credential").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(!body.contains("secret"), "{body}");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "on the socket the read ran unchecked");
        // The negative control: the operator gets what the handler answered.
        assert_eq!(
            get_as(router, "/secret", &token).await,
            (StatusCode::OK, "secret".into())
        );
    }

    #[tokio::test]
    async fn a_read_that_panics_before_its_check_answers_the_credentials_refusal() {
        let (_dir, router, token, _) = listener(Checking::InReads);
        let (status, _) = get_as(router.clone(), "/panics", "not-a-credential").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        // The negative control: for the operator the panic goes on (to `enveloped`'s 500).
        let operator = tokio::spawn(async move { get_as(router, "/panics", &token).await });
        assert!(operator.await.unwrap_err().is_panic());
    }

    #[tokio::test]
    async fn on_loopback_no_handler_runs_for_an_unknown_caller() {
        let (_dir, router, token, ran) = listener(Checking::BeforeHandler);
        let (status, _) = get_as(router.clone(), "/secret", "not-a-credential").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(ran.load(Ordering::SeqCst), 0, "refused before the handler");
        assert_eq!(get_as(router, "/secret", &token).await.0, StatusCode::OK);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn only_a_read_on_the_owner_only_socket_reaches_its_handler_unchecked() {
        let unsafe_methods = [
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::CONNECT,
        ];
        let safe_methods = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE];
        for method in unsafe_methods.iter().chain(&safe_methods) {
            assert!(Checking::BeforeHandler.before_handler(method), "{method} on loopback");
        }
        for method in &unsafe_methods {
            assert!(Checking::InReads.before_handler(method), "{method} on the socket");
        }
        for method in &safe_methods {
            assert!(!Checking::InReads.before_handler(method), "{method} on the socket");
        }
    }
}
