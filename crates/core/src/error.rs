//! The stable error codes of the wire and the safe refusal that carries one.

use serde::Serialize;

/// Every refusal the product answers with. The snake_case name is the wire code and never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthenticated,
    Forbidden,
    AuthorityReleased,
    WrongCredentialClass,
    NotFound,
    InvalidInput,
    InvalidRequest,
    UnknownScope,
    UnknownBinding,
    ScopeDisabled,
    CorrelationNotOwned,
    EventTypeNotAllowed,
    CausalDepthExceeded,
    CausalRateExceeded,
    RequestConflict,
    OperationFailed,
    Conflict,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::AuthorityReleased => "authority_released",
            ErrorCode::WrongCredentialClass => "wrong_credential_class",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnknownScope => "unknown_scope",
            ErrorCode::UnknownBinding => "unknown_binding",
            ErrorCode::ScopeDisabled => "scope_disabled",
            ErrorCode::CorrelationNotOwned => "correlation_not_owned",
            ErrorCode::EventTypeNotAllowed => "event_type_not_allowed",
            ErrorCode::CausalDepthExceeded => "causal_depth_exceeded",
            ErrorCode::CausalRateExceeded => "causal_rate_exceeded",
            ErrorCode::RequestConflict => "request_conflict",
            ErrorCode::OperationFailed => "operation_failed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status this code is answered with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden | ErrorCode::AuthorityReleased | ErrorCode::WrongCredentialClass => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::InvalidInput | ErrorCode::InvalidRequest => 400,
            ErrorCode::Conflict | ErrorCode::RequestConflict => 409,
            ErrorCode::Internal => 500,
            ErrorCode::UnknownScope
            | ErrorCode::UnknownBinding
            | ErrorCode::ScopeDisabled
            | ErrorCode::CorrelationNotOwned
            | ErrorCode::EventTypeNotAllowed
            | ErrorCode::CausalDepthExceeded
            | ErrorCode::CausalRateExceeded
            | ErrorCode::OperationFailed => 422,
        }
    }
}

/// A refusal with a stable code and a message that is safe to show anyone: it never carries a
/// secret, a token, reference text or a backend's own error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct Refusal {
    #[serde(rename = "error")]
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            remedy: None,
        }
    }

    pub fn with_remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = Some(remedy.into());
        self
    }

    /// The bare refusal every failed authority check answers with, whichever check failed.
    pub fn forbidden() -> Self {
        Refusal::new(ErrorCode::Forbidden, "the credential does not authorize this request")
    }

    pub fn authority_released() -> Self {
        Refusal::new(
            ErrorCode::AuthorityReleased,
            "this segment already declared a wait or an outcome; its authority is released",
        )
    }

    pub fn wrong_credential_class() -> Self {
        Refusal::new(
            ErrorCode::WrongCredentialClass,
            "this credential class is not accepted on this socket",
        )
    }

    pub fn not_found(what: &str) -> Self {
        Refusal::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::InvalidInput, message)
    }

    pub fn internal() -> Self {
        Refusal::new(ErrorCode::Internal, "internal error; see the daemon log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_flat_envelope() {
        let r = Refusal::forbidden();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["error"], "forbidden");
        assert!(v.get("remedy").is_none());
    }

    #[test]
    fn serde_name_matches_as_str() {
        for code in [
            ErrorCode::AuthorityReleased,
            ErrorCode::WrongCredentialClass,
            ErrorCode::CausalDepthExceeded,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
