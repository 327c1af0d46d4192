use serde_json::json;

use super::*;

#[test]
fn nulls_are_never_allowed() {
    let mut value =
        json!({"type": ["string", "null"], "default": null, "x": {"anyOf": [{"$ref": "#/a"}, {"type": "null"}]}});
    strip_nulls(&mut value);
    assert_eq!(value, json!({"type": "string", "x": {"anyOf": [{"$ref": "#/a"}]}}));
}

#[test]
fn every_host_executor_constrains_its_config() {
    let schema = schema();
    let cases = schema["$defs"]["BindingConfig"]["allOf"].as_array().unwrap();
    let executors: Vec<&str> = cases
        .iter()
        .map(|c| c["if"]["properties"]["executor"]["const"].as_str().unwrap())
        .collect();
    assert_eq!(executors, ["shell", "claude-code", "codex", "github-hold"]);
    assert_eq!(cases[0]["then"]["properties"]["config"]["$ref"], "#/$defs/ShellConfig");
}

#[test]
fn the_page_links_each_type_and_says_where_it_sits() {
    let page = markdown(&schema());
    assert!(
        page.contains("## BindingConfig\n\nAt `/scopes/<name>/bindings/<name>`."),
        "{page}"
    );
    assert!(page.contains("`/scopes/<name>/bindings/<name>/config (executor `shell`)`"));
    assert!(page.contains("| `bindings` | map of name to [BindingConfig](#bindingconfig) |"));
}
