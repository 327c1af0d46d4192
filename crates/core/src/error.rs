//! The stable error codes of the wire and the safe refusal that carries one.

use serde::Serialize;

/// Every refusal the product answers with. The snake_case name is the wire code and never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthenticated,
    Forbidden,
    InvalidConfig,
    InvalidCursor,
    RangeNotSatisfiable,
    MethodNotAllowed,
    BodyTooLarge,
    RequestTimeout,
    UriTooLong,
    HeadersTooLarge,
    IdempotencyKeyRequired,
    IdempotencyConflict,
    StaleGeneration,
    /// This daemon cannot run the configuration generation another daemon on its store committed.
    GenerationUnavailable,
    ScopeInUse,
    AuthorityReleased,
    WrongCredentialClass,
    ForbiddenRole,
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
    QuotaExceeded,
    RequestConflict,
    RequestInProgress,
    SessionNotOpen,
    InvalidManifest,
    PackRuntimeRequirementUnmet,
    OperationFailed,
    Conflict,
    /// An abbreviated id that more than one record's id starts with.
    AmbiguousId,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::InvalidConfig => "invalid_config",
            ErrorCode::InvalidCursor => "invalid_cursor",
            ErrorCode::RangeNotSatisfiable => "range_not_satisfiable",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::IdempotencyKeyRequired => "idempotency_key_required",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::StaleGeneration => "stale_generation",
            ErrorCode::GenerationUnavailable => "generation_unavailable",
            ErrorCode::ScopeInUse => "scope_in_use",
            ErrorCode::AuthorityReleased => "authority_released",
            ErrorCode::WrongCredentialClass => "wrong_credential_class",
            ErrorCode::ForbiddenRole => "forbidden_role",
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
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::RequestConflict => "request_conflict",
            ErrorCode::RequestInProgress => "request_in_progress",
            ErrorCode::SessionNotOpen => "session_not_open",
            ErrorCode::InvalidManifest => "invalid_manifest",
            ErrorCode::PackRuntimeRequirementUnmet => "pack_runtime_requirement_unmet",
            ErrorCode::OperationFailed => "operation_failed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::AmbiguousId => "ambiguous_id",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status this code is answered with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden
            | ErrorCode::AuthorityReleased
            | ErrorCode::WrongCredentialClass
            | ErrorCode::ForbiddenRole => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::InvalidInput
            | ErrorCode::InvalidManifest
            | ErrorCode::PackRuntimeRequirementUnmet
            | ErrorCode::InvalidRequest
            | ErrorCode::InvalidCursor
            | ErrorCode::IdempotencyKeyRequired => 400,
            ErrorCode::Conflict
            | ErrorCode::AmbiguousId
            | ErrorCode::RequestConflict
            | ErrorCode::RequestInProgress
            | ErrorCode::SessionNotOpen
            | ErrorCode::IdempotencyConflict
            | ErrorCode::StaleGeneration
            | ErrorCode::ScopeInUse => 409,
            ErrorCode::Internal => 500,
            ErrorCode::GenerationUnavailable => 503,
            ErrorCode::RangeNotSatisfiable => 416,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::BodyTooLarge => 413,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::UriTooLong => 414,
            ErrorCode::HeadersTooLarge => 431,
            ErrorCode::UnknownScope
            | ErrorCode::UnknownBinding
            | ErrorCode::ScopeDisabled
            | ErrorCode::CorrelationNotOwned
            | ErrorCode::EventTypeNotAllowed
            | ErrorCode::InvalidConfig
            | ErrorCode::CausalDepthExceeded
            | ErrorCode::CausalRateExceeded
            | ErrorCode::QuotaExceeded
            | ErrorCode::OperationFailed => 422,
        }
    }
}

/// A refusal with a stable code and a message that is safe to show anyone: it never carries a
/// secret, a token, reference text or a backend's own error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", .operation_code.as_deref().unwrap_or(.code.as_str()))]
pub struct Refusal {
    pub code: ErrorCode,
    /// An operation's own refusal code (`code` is then [`ErrorCode::OperationFailed`]): the wire code.
    pub operation_code: Option<String>,
    pub message: String,
    pub remedy: Option<String>,
    /// Code-specific fields beside the envelope's own (`diagnostics`, `unmet`, ...).
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// RFC 0076's normative payload: exactly these fields, in this order, and no `message`.
const REQUIREMENT_UNMET_FIELDS: [&str; 3] = ["unmet", "manifest", "advice"];

/// The flat envelope: `error`, `message`, `remedy` when there is one, then the code's own fields.
/// `pack_runtime_requirement_unmet` is written exactly as RFC 0076 gives it.
impl Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("error", self.wire_code())?;
        if self.code == ErrorCode::PackRuntimeRequirementUnmet {
            for name in REQUIREMENT_UNMET_FIELDS {
                map.serialize_entry(name, &self.fields.get(name))?;
            }
            return map.end();
        }
        map.serialize_entry("message", &self.message)?;
        if let Some(remedy) = &self.remedy {
            map.serialize_entry("remedy", remedy)?;
        }
        for (name, value) in &self.fields {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            operation_code: None,
            message: message.into(),
            remedy: None,
            fields: Default::default(),
        }
    }

    /// An operation's refusal, answered `422` with the operation's own code and message. A code that
    /// is not snake_case is replaced by `operation_failed`, so the wire keeps its grammar.
    pub fn operation(code: &str, message: impl Into<String>) -> Self {
        let code = if is_snake_case(code) {
            code
        } else {
            ErrorCode::OperationFailed.as_str()
        };
        Refusal {
            operation_code: Some(code.to_owned()),
            ..Refusal::new(ErrorCode::OperationFailed, message)
        }
    }

    /// The code on the wire: the operation's own, or the host's.
    pub fn wire_code(&self) -> &str {
        self.operation_code.as_deref().unwrap_or(self.code.as_str())
    }

    pub fn with_remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = Some(remedy.into());
        self
    }

    /// Adds a code-specific field to the envelope. The envelope's own names are not replaced.
    pub fn with_field(mut self, name: &str, value: serde_json::Value) -> Self {
        if !["error", "message", "remedy"].contains(&name) {
            self.fields.insert(name.to_owned(), value);
        }
        self
    }

    /// RFC 0076's install refusal: the requirements the host will not grant, the manifest as
    /// `name@version`, and operator-facing advice.
    pub fn requirement_unmet(unmet: Vec<String>, manifest: String, advice: String) -> Self {
        Refusal::new(ErrorCode::PackRuntimeRequirementUnmet, advice.clone())
            .with_field("unmet", unmet.into())
            .with_field("manifest", manifest.into())
            .with_field("advice", advice.into())
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

    /// A scope id the active configuration does not have.
    pub fn unknown_scope() -> Self {
        Refusal::new(
            ErrorCode::UnknownScope,
            "no scope has this id in the active configuration",
        )
        .with_remedy("list the scopes with `open-conduit scopes`")
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

/// A wire code's grammar: lower-case snake_case, at most 64 bytes.
pub fn is_snake_case(code: &str) -> bool {
    code.len() <= 64
        && code.starts_with(|c: char| c.is_ascii_lowercase())
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_requirement_refusal_is_exactly_the_rfc_payload() {
        let refusal =
            super::Refusal::requirement_unmet(vec!["subprocess".into()], "cron@1.0.0".into(), "grant it".into());
        assert_eq!(
            serde_json::to_string(&refusal).unwrap(),
            r#"{"error":"pack_runtime_requirement_unmet","unmet":["subprocess"],"manifest":"cron@1.0.0","advice":"grant it"}"#
        );
    }

    use super::*;

    #[test]
    fn operation_refusals_carry_their_own_code() {
        let r = Refusal::operation("issue_locked", "the issue is locked");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["error"], "issue_locked");
        assert_eq!(r.code.http_status(), 422);
        assert_eq!(Refusal::operation("Bad Code!", "x").wire_code(), "operation_failed");
    }

    #[test]
    fn serializes_as_flat_envelope() {
        let r = Refusal::forbidden();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["error"], "forbidden");
        assert!(v.get("remedy").is_none());
    }

    #[test]
    fn code_specific_fields_sit_beside_the_envelope() {
        let r = Refusal::new(ErrorCode::InvalidConfig, "bad").with_field("diagnostics", serde_json::json!([]));
        let r = r.with_field("error", serde_json::json!("spoofed"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["diagnostics"], serde_json::json!([]));
        assert_eq!(v["error"], "invalid_config");
    }

    #[test]
    fn serde_name_matches_as_str() {
        for code in [
            ErrorCode::AuthorityReleased,
            ErrorCode::WrongCredentialClass,
            ErrorCode::CausalDepthExceeded,
            ErrorCode::MethodNotAllowed,
            ErrorCode::BodyTooLarge,
            ErrorCode::RequestTimeout,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
