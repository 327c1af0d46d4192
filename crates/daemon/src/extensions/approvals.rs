//! The human extension: its gate parks a call an approval rule covers (in the caller's scope) until
//! a person decides. The approval is bound to the Work, the operation and the SHA-256 of the
//! canonical input, and lets one call through; a denial refuses the repeated call
//! `approval_denied` with the reason, and a timeout `approval_expired`. The approval is used up only
//! when every gate let the call through (`Gate::passed`).

use std::sync::Arc;

use conduit_config::{ApprovalRule, CurrentConfig};
use conduit_core::approval::{judge, Approval, ApprovalState, Judgement};
use conduit_core::tool::ToolSource;
use conduit_core::{Duration, Timestamp};
use conduit_server::now;
use conduit_store::{new_id, Store, StoreError, Tx};
use conduit_toolbelt::gate::{Gate, GateAnswer, GateCall, GateFuture, WaitPlan};
use conduit_toolbelt::registry::WaitRequest;
use conduit_toolbelt::registry::{OperationError, Registration};
use conduit_toolbelt::LiveRegistry;
use serde_json::json;

use crate::store_thread::on_store_thread;

/// The registration that owns the approvals gate (and the name a package cannot take).
pub const NAME: &str = "human";

/// The event a decision records on the Work's own key, which wakes the parked Work.
pub const DECIDED: &str = "approval.decided";

pub fn registration() -> Registration {
    Registration {
        name: NAME.into(),
        source: ToolSource::HostExtension,
        operations: vec![],
        toolsets: vec![],
    }
}

#[derive(Clone)]
pub struct HumanGate {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// For the toolsets a rule names.
    pub live: Arc<LiveRegistry>,
}

impl Gate for HumanGate {
    fn ask(&self, call: GateCall) -> GateFuture {
        Box::pin(self.clone().decide(call))
    }

    /// Uses the approval up once every gate let the call through: it runs now.
    fn passed(&self, call: GateCall) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        if self.rule_for(&call).is_none() {
            // No rule covers the call, so no approval was used: no store round trip.
            return Box::pin(async {});
        }
        let store = self.store.clone();
        Box::pin(async move {
            let used = on_store_thread(store, move |store| store.write(|tx| use_up(tx, &call)));
            if used.await.is_err() {
                tracing::error!("an approval could not be marked used");
            }
        })
    }
}

impl HumanGate {
    async fn decide(self, call: GateCall) -> GateAnswer {
        let Some(rule) = self.rule_for(&call) else {
            return GateAnswer::Pass;
        };
        let store = self.store.clone();
        let judged = on_store_thread(store, move |store| {
            store.write(|tx| judge_and_record(tx, &call, &rule, now()))
        });
        judged.await.unwrap_or_else(|_| {
            GateAnswer::Refuse(OperationError::new("gate_failed", "the approvals could not be read"))
        })
    }

    /// The first rule of the caller's scope that covers the operation, by name or toolset.
    fn rule_for(&self, call: &GateCall) -> Option<ApprovalRule> {
        let registry = self.live.get();
        let holds = |toolset: &str, operation: &str| registry.toolset_holds(toolset, operation);
        self.config
            .get()
            .approval_rule(&call.scope, &call.operation, holds)
            .cloned()
    }
}

/// The rule of `conduit_core::approval::judge`, with its records: a used or expired approval is
/// written back, a new one is requested.
fn judge_and_record(
    tx: &mut dyn Tx,
    call: &GateCall,
    rule: &ApprovalRule,
    at: Timestamp,
) -> Result<GateAnswer, StoreError> {
    let existing = tx.approval_for(&call.work_id, &call.operation, &call.input_hash)?;
    let answer = match (judge(existing.as_ref(), at, caller(call).as_deref()), existing) {
        (Judgement::Pass, _) => GateAnswer::Pass,
        (Judgement::Denied(reason), _) => {
            let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
            GateAnswer::Refuse(OperationError::new(
                "approval_denied",
                format!("a person denied this call{why}"),
            ))
        }
        (Judgement::Expired, existing) => {
            if let Some(mut approval) = existing.filter(|a| a.state == ApprovalState::Pending) {
                approval.state = ApprovalState::Expired;
                tx.put_approval(&approval)?;
            }
            GateAnswer::Refuse(OperationError::new(
                "approval_expired",
                "no one decided on this call in time",
            ))
        }
        (Judgement::Waiting, Some(approval)) => park(&approval, at),
        _ => {
            let approval = request(call, rule, at);
            tx.put_approval(&approval)?;
            park(&approval, at)
        }
    };
    Ok(answer)
}

/// The call as an approval records who used it: `<execution>/<request id>`, when it has one.
fn caller(call: &GateCall) -> Option<String> {
    call.request_id.as_ref().map(|r| format!("{}/{r}", call.execution_id))
}

/// Marks the call's approved approval used, by this call.
fn use_up(tx: &mut dyn Tx, call: &GateCall) -> Result<(), StoreError> {
    let approval = tx.approval_for(&call.work_id, &call.operation, &call.input_hash)?;
    if let Some(mut approval) = approval.filter(|a| a.state == ApprovalState::Approved) {
        approval.state = ApprovalState::Used;
        approval.used_by = caller(call);
        tx.put_approval(&approval)?;
    }
    Ok(())
}

fn request(call: &GateCall, rule: &ApprovalRule, at: Timestamp) -> Approval {
    let timeout = rule.timeout.as_deref().and_then(Duration::parse);
    Approval {
        id: new_id(),
        work_id: call.work_id.clone(),
        execution_id: call.execution_id.clone(),
        scope: call.scope.clone(),
        operation: call.operation.clone(),
        input_hash: call.input_hash.clone(),
        input: Some(call.input.clone()),
        approvers: rule.approvers.clone(),
        state: ApprovalState::Pending,
        reason: None,
        decided_by: None,
        requested_at: at,
        expires_at: timeout.map(|d| Timestamp(at.0 + d.0)),
        decided_at: None,
        used_by: None,
    }
}

/// Parks the caller until the decision (an `approval.decided` on its Work's key) or the deadline.
fn park(approval: &Approval, at: Timestamp) -> GateAnswer {
    GateAnswer::Park(WaitPlan {
        output: json!({"approval_id": approval.id, "awaiting": "a person's approval", "operation": approval.operation,
                       "approvers": approval.approvers, "expires_at": approval.expires_at}),
        wait: WaitRequest {
            types: vec![DECIDED.into()],
            keys: vec![],
            timeout: approval.expires_at.map(|due| Duration((due.0 - at.0).max(1))),
        },
    })
}
