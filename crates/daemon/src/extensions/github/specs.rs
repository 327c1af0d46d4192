//! The `github` registration as the catalog describes it: each operation's schema, safety tier and
//! replay policy, and the toolsets for an author and a reviewer.

use std::sync::Arc;

use conduit_core::tool::{CatalogFields, Egress, ReplayPolicy, SafetyTier, ToolSource};
use conduit_toolbelt::registry::{OperationSpec, Registration, ToolsetEntry, ToolsetSpec};
use serde_json::{json, Value};

use super::{Github, NAME};

/// The release every operation joined its toolsets in.
const SINCE: &str = "0.1.0";

/// What GitHub calls cost and how a retry behaves: reads may be re-run (GitHub's state moves);
/// writes are not idempotent on GitHub's side, so a retry with the same request id is replayed by
/// the host rather than run again.
fn fields(tier: SafetyTier, replay: ReplayPolicy) -> CatalogFields {
    CatalogFields {
        safety_tier: tier,
        egress: Egress::SafeFetch,
        replay_policy: replay,
        credential_ref: true,
        ..CatalogFields::write()
    }
}

struct Op {
    name: &'static str,
    title: &'static str,
    summary: &'static str,
    input: Value,
    tier: SafetyTier,
    replay: ReplayPolicy,
    capabilities: &'static [&'static str],
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": properties})
}

fn ops() -> Vec<Op> {
    let repo = json!({"type": "string", "description": "owner/name"});
    let number = json!({"type": "integer", "minimum": 1});
    let text = json!({"type": "string"});
    let timeout = json!({"type": "string", "description": "a duration such as 30m or 2h"});
    let read = |name, title, summary, input| Op {
        name,
        title,
        summary,
        input,
        tier: SafetyTier::Read,
        replay: ReplayPolicy::NonDeterministic,
        capabilities: &[],
    };
    let write = |name, title, summary, input| Op {
        tier: SafetyTier::Write,
        replay: ReplayPolicy::Idempotent,
        ..read(name, title, summary, input)
    };
    let numbered = object(&["repo", "number"], json!({"repo": repo, "number": number}));
    let comment = object(
        &["repo", "number", "body"],
        json!({"repo": repo, "number": number, "body": text}),
    );
    let awaited = object(
        &["repo", "number"],
        json!({"repo": repo, "number": number, "timeout": timeout}),
    );
    vec![
        read("github.issue.view", "View an issue", "An issue's title, state, body, author and labels.", numbered.clone()),
        read(
            "github.issue.list",
            "List issues",
            "A repository's issues (open by default), newest first; `limit` caps them (default 30, at most 1000).",
            object(&["repo"], json!({"repo": repo, "state": {"enum": ["open", "closed", "all"]},
                "labels": {"type": "array", "items": text}, "limit": {"type": "integer", "minimum": 1, "maximum": 1000}})),
        ),
        write("github.issue.comment", "Comment on an issue", "Adds a comment to an issue.", comment.clone()),
        read("github.pr.view", "View a pull request", "A pull request's title, state, body, head and base.", numbered.clone()),
        write(
            "github.pr.create",
            "Open a pull request",
            "Opens a pull request from `head` into `base`.",
            object(&["repo", "title", "head", "base"], json!({"repo": repo, "title": text, "head": text, "base": text,
                "body": text, "draft": {"type": "boolean"}})),
        ),
        write(
            "github.pr.edit",
            "Edit a pull request",
            "Changes a pull request's title, body, base, or state (open or closed).",
            object(&["repo", "number"], json!({"repo": repo, "number": number, "title": text, "body": text,
                "base": text, "state": {"enum": ["open", "closed"]}})),
        ),
        write("github.pr.comment", "Comment on a pull request", "Adds a comment to a pull request's conversation.", comment),
        write(
            "github.pr.review",
            "Review a pull request",
            "Submits a review: APPROVE, REQUEST_CHANGES or COMMENT, with an optional body.",
            object(&["repo", "number", "event"], json!({"repo": repo, "number": number, "body": text,
                "event": {"enum": ["APPROVE", "REQUEST_CHANGES", "COMMENT"]}})),
        ),
        read(
            "github.pr.reviews",
            "A pull request's reviews",
            "The reviews submitted on the pull request, oldest first: author, state and time.",
            numbered.clone(),
        ),
        read("github.pr.diff", "A pull request's diff", "The pull request's unified diff.", numbered),
        read(
            "github.pr.wait_review",
            "Wait for a review",
            "Ends this segment waiting for the next review submitted on the pull request (or the timeout); the Work resumes with the review as input.",
            awaited.clone(),
        ),
        read(
            "github.checks.wait",
            "Wait for checks",
            "The pull request's check suites if all have completed; otherwise ends this segment waiting for the next one to complete (call again when resumed).",
            awaited,
        ),
        Op {
            capabilities: &["git.credential"],
            ..read(
                "github.git.credential",
                "A git credential",
                "A username and token for the configured GitHub host, for git (`os git-credential`); nothing for any other host.",
                object(&["host"], json!({"host": text, "protocol": text, "path": text})),
            )
        },
    ]
}

const AUTHOR: &[&str] = &[
    "github.issue.view",
    "github.issue.list",
    "github.issue.comment",
    "github.pr.view",
    "github.pr.create",
    "github.pr.edit",
    "github.pr.comment",
    "github.pr.diff",
    "github.pr.reviews",
    "github.pr.wait_review",
    "github.checks.wait",
    "github.git.credential",
];

const REVIEWER: &[&str] = &[
    "github.issue.view",
    "github.pr.view",
    "github.pr.diff",
    "github.pr.reviews",
    "github.pr.comment",
    "github.pr.review",
    "github.checks.wait",
    "github.git.credential",
];

fn toolset(name: &str, operations: &[&str]) -> ToolsetSpec {
    ToolsetSpec {
        name: name.into(),
        operations: operations
            .iter()
            .map(|op| ToolsetEntry {
                operation: (*op).into(),
                since: SINCE.into(),
            })
            .collect(),
    }
}

pub fn registration(handler: Arc<Github>) -> Registration {
    let operations = ops()
        .into_iter()
        .map(|op| OperationSpec {
            name: op.name.into(),
            title: Some(op.title.into()),
            summary: op.summary.into(),
            input_schema: op.input,
            output_schema: json!({"type": "object"}),
            catalog: fields(op.tier, op.replay),
            capabilities: op.capabilities.iter().map(|c| (*c).to_owned()).collect(),
            handler: handler.clone(),
        })
        .collect();
    Registration {
        name: NAME.into(),
        source: ToolSource::HostExtension,
        operations,
        toolsets: vec![toolset("github.author", AUTHOR), toolset("github.reviewer", REVIEWER)],
    }
}
