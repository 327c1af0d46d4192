//! Human approvals: a call a rule covers waits for a person's decision. An approval is bound to
//! one Work, one operation and the SHA-256 of one canonical input, so approving a call never
//! approves a different one, and an approval lets exactly one call through.

use serde::Serialize;

use crate::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    Expired,
    /// Approved, and the call it approved went through.
    Used,
    /// Its Work was cancelled before anyone decided.
    Cancelled,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Expired => "expired",
            ApprovalState::Used => "used",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<ApprovalState> {
        use ApprovalState::*;
        [Pending, Approved, Denied, Expired, Used, Cancelled]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    pub id: String,
    pub work_id: String,
    pub execution_id: String,
    pub scope: String,
    pub operation: String,
    pub input_hash: String,
    /// The input the call carried, shown to whoever decides; absent for approvals recorded before
    /// the store kept it.
    pub input: Option<serde_json::Value>,
    /// Operator names who may decide; empty: anyone with the `operate` role.
    pub approvers: Vec<String>,
    pub state: ApprovalState,
    /// The denial's reason.
    pub reason: Option<String>,
    /// The deciding principal (`operator:<name>`).
    pub decided_by: Option<String>,
    pub requested_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub decided_at: Option<Timestamp>,
    /// The call that used it (`<execution>/<request id>`), so a retry of that same request is
    /// let through again rather than asking a person twice.
    pub used_by: Option<String>,
}

/// What the gate does with a covered call, given the approval already bound to it (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Approved and unused: let the call through, using the approval up.
    Pass,
    Denied(Option<String>),
    Expired,
    /// Still undecided: park again on the same approval.
    Waiting,
    /// No approval yet (or only used ones): request one and park.
    Request,
}

/// `caller` is `<execution>/<request id>` when the call carries a request id.
pub fn judge(existing: Option<&Approval>, now: Timestamp, caller: Option<&str>) -> Judgement {
    let Some(approval) = existing else {
        return Judgement::Request;
    };
    match approval.state {
        ApprovalState::Used if caller.is_some() && approval.used_by.as_deref() == caller => Judgement::Pass,
        ApprovalState::Approved => Judgement::Pass,
        ApprovalState::Denied => Judgement::Denied(approval.reason.clone()),
        ApprovalState::Expired => Judgement::Expired,
        ApprovalState::Pending if approval.expires_at.is_some_and(|at| now.0 >= at.0) => Judgement::Expired,
        ApprovalState::Pending => Judgement::Waiting,
        ApprovalState::Used | ApprovalState::Cancelled => Judgement::Request,
    }
}

/// Whether `principal` (`operator:<name>`) may decide `approval`.
pub fn may_decide(approval: &Approval, principal: &str) -> bool {
    let name = principal.strip_prefix("operator:").unwrap_or(principal);
    approval.approvers.is_empty() || approval.approvers.iter().any(|a| a == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(state: ApprovalState, expires_at: Option<i64>) -> Approval {
        Approval {
            id: "a1".into(),
            work_id: "w".into(),
            execution_id: "x".into(),
            scope: "s".into(),
            operation: "notes.op".into(),
            input_hash: "h".into(),
            input: None,
            approvers: vec!["alice".into()],
            state,
            reason: Some("no".into()),
            decided_by: None,
            requested_at: Timestamp(0),
            expires_at: expires_at.map(Timestamp),
            decided_at: None,
            used_by: Some("x/r1".into()),
        }
    }

    #[test]
    fn each_state_judges_the_repeated_call() {
        use ApprovalState::*;
        let now = Timestamp(100);
        let judged = |state, expires_at| judge(Some(&approval(state, expires_at)), now, None);
        assert_eq!(judge(None, now, None), Judgement::Request);
        assert_eq!(judged(Approved, None), Judgement::Pass);
        assert_eq!(judged(Denied, None), Judgement::Denied(Some("no".into())));
        assert_eq!(judged(Pending, Some(200)), Judgement::Waiting);
        assert_eq!(judged(Pending, Some(100)), Judgement::Expired, "due at its deadline");
        assert_eq!(judged(Used, None), Judgement::Request, "used once");
        let used = approval(Used, None);
        assert_eq!(
            judge(Some(&used), now, Some("x/r1")),
            Judgement::Pass,
            "a retry of the call that used it"
        );
        assert_eq!(judge(Some(&used), now, Some("y/r1")), Judgement::Request);
    }

    #[test]
    fn only_named_approvers_decide_when_the_rule_names_some() {
        let mut a = approval(ApprovalState::Pending, None);
        assert!(may_decide(&a, "operator:alice"));
        assert!(!may_decide(&a, "operator:bob"));
        a.approvers.clear();
        assert!(may_decide(&a, "operator:bob"));
    }
}
