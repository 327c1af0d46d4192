//! `POST /v1/actions`: an operator invokes an action by name on a Work or in a scope; the host
//! accepts its `core.action` event stamped with the operator as its actor.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use conduit_config::Snapshot;
use conduit_core::{Refusal, Role};
use conduit_scheduler::{act, check_operator_type, Action, ActionTarget, Operator};
use conduit_store::Tx;
use serde::Deserialize;
use serde_json::{json, Value};

use super::access::admit;
use super::state::Management;
use crate::clock::now;
use crate::envelope::Answer;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Act {
    /// The action's name: a namespaced event type outside the host's families.
    action: String,
    /// The Work it is invoked on (its own key); or else `scope`.
    work_id: Option<String>,
    scope: Option<String>,
    /// With `scope`: the correlation key it is invoked on.
    correlation_key: Option<String>,
    #[serde(default)]
    data: Value,
}

impl Act {
    /// Exactly one of a Work and a scope, and a key only with a scope; checked before anything runs.
    fn check(&self) -> Result<(), Refusal> {
        check_operator_type(&self.action)?;
        match (&self.work_id, &self.scope, &self.correlation_key) {
            (Some(_), None, None) | (None, Some(_), _) => Ok(()),
            _ => Err(Refusal::invalid_input(
                "an action is invoked on a `work_id`, or in a `scope` (with an optional `correlation_key`)",
            )),
        }
    }

    fn into_action(self) -> Action {
        let target = match (self.work_id, self.scope) {
            (Some(work), _) => ActionTarget::Work(work),
            (None, scope) => ActionTarget::Scope {
                scope: scope.unwrap_or_default(),
                key: self.correlation_key,
            },
        };
        Action {
            action: self.action,
            target,
            data: self.data,
        }
    }
}

/// Invokes an action: `201` with its event and whether it woke the Work.
pub(super) async fn invoke(State(s): State<Management>, headers: HeaderMap, uri: Uri, body: Body) -> Answer {
    let admitted = admit(&headers, &uri, body, Role::Operate, Act::check).await?;
    let run = |tx: &mut dyn Tx, config: &Snapshot, by: &Operator<'_>, req: Act| {
        let (event, woke) = act(tx, config, req.into_action(), by, now())?;
        Ok((StatusCode::CREATED, json!({"event": event, "woke": woke})))
    };
    admitted.once(&s, Box::new(run)).await
}
