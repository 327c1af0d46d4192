//! The release's toolsets only gain operations: `toolsets.json` records every operation each
//! bundled toolset has held and the release it joined in. A release that drops or re-dates one
//! fails here; one that adds one fails until the record gains it too, so every change to a toolset
//! is a visible diff (and the operations reference lists them).

#![allow(clippy::expect_used)]

use std::collections::BTreeMap;

use conduit_toolbelt::registry::{lost_operations, ToolsetEntry, ToolsetSpec};

const RECORD: &str = include_str!("../toolsets.json");

/// The record: toolset → operation → the release it joined in.
fn recorded() -> Vec<ToolsetSpec> {
    let record: BTreeMap<String, BTreeMap<String, String>> =
        serde_json::from_str(RECORD).expect("toolsets.json is a JSON object of objects");
    record
        .into_iter()
        .map(|(name, entries)| ToolsetSpec {
            name,
            operations: entries
                .into_iter()
                .map(|(operation, since)| ToolsetEntry { operation, since })
                .collect(),
        })
        .collect()
}

fn release() -> Vec<ToolsetSpec> {
    conduit_daemon::release_registry().toolsets().cloned().collect()
}

#[test]
fn the_release_keeps_every_operation_its_toolsets_ever_held() {
    let lost = lost_operations(&recorded(), &release());
    assert!(
        lost.is_empty(),
        "a toolset only gains operations; this release loses {lost:?}"
    );
}

#[test]
fn every_operation_a_toolset_gained_is_recorded() {
    let unrecorded = lost_operations(&release(), &recorded());
    assert!(
        unrecorded.is_empty(),
        "record these in crates/daemon/toolsets.json: {unrecorded:?}"
    );
}

/// Negative control: a record holding an operation the release does not is caught.
#[test]
fn a_dropped_operation_is_caught() {
    let mut record = recorded();
    record[0].operations.push(ToolsetEntry {
        operation: "github.repo.delete".into(),
        since: "0.1.0".into(),
    });
    assert_eq!(lost_operations(&record, &release()).len(), 1);
}
